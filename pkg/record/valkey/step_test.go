package valkey_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// finished is progress(i, 1) ended, with one succeeded tool entry whose
// inputs recent_skill_inputs reads.
func finished(i int) *record.Turn {
	tr := progress(i, 1)
	tr.Status = record.StatusSucceeded
	tr.History = []record.HistoryEntry{{Role: "tool", Kind: record.KindToolResult, Tool: fmt.Sprint("tool", i%3),
		Status: record.ResultSucceeded, ToolInputs: map[string]any{"n": float64(i)}, At: tr.StartedAt}}
	return tr
}

// Issue 13: a step reads what its LLM view needs and no more, and the view
// it builds is exactly the view of the whole conversation (docs/design.md §3.4a,
// §3.6), for any window and any turn, with old active turns included.
func TestLoadStepViewEqualsFullView(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		cid := create(t, s, valkeytest.ID(t, "u"))
		ctx := t.Context()
		// An old turn still running (started first), 60 finished turns, and
		// one waiting in the middle.
		old := progress(0, 2)
		if err := s.SaveTurn(ctx, cid, old); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 60; i++ {
			tr := finished(i)
			if i == 30 {
				tr = progress(i, 1)
				tr.Status = record.StatusAwaitingApproval
				tr.TaskToken = "tok30"
				tr.Pending = []record.PendingCall{{CallID: "t30-c0", State: record.CallNeedsApproval}}
				tr.Messages = tr.Messages[:2] // the call, no result yet
			}
			if err := s.SaveTurn(ctx, cid, tr); err != nil {
				t.Fatal(err)
			}
		}
		full, _, err := s.Load(ctx, cid, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			self   string
			window int
			max    int // turns read at most
		}{
			{"t60", 30, 1 + 2 + 10},
			{"t00", 30, 1 + 1 + 10},
			{"t45", 80, 1 + 2 + 27},
			{"t60", 500, 62},
		} {
			step, _, err := s.LoadStep(ctx, cid, record.Query{TurnID: tc.self, Window: tc.window})
			if err != nil {
				t.Fatalf("LoadStep(%s, %d) = %v", tc.self, tc.window, err)
			}
			if got := len(step.Turns); got > tc.max {
				t.Errorf("LoadStep(%s, window %d) read %d turns, want at most %d", tc.self, tc.window, got, tc.max)
			}
			for _, id := range []string{"t00", "t30", tc.self} {
				if _, ok := step.Turn(id); !ok {
					t.Errorf("LoadStep(%s, %d) lacks turn %s (active or its own)", tc.self, tc.window, id)
				}
			}
			if diff := cmp.Diff(full.LLMView(tc.self, tc.window), step.LLMView(tc.self, tc.window)); diff != "" {
				t.Errorf("LoadStep(%s, %d) view differs from the full view (-full +step):\n%s", tc.self, tc.window, diff)
			}
			if diff := cmp.Diff(full.RecentSkillInputs(), step.RecentSkillInputs()); diff != "" {
				t.Errorf("recent_skill_inputs differ (-full +step):\n%s", diff)
			}
		}
		// Active turns are read whole: the API answers their task tokens.
		if step, _, err := s.LoadStep(ctx, cid, record.Query{}); err != nil || len(step.Turns) != 2 {
			t.Errorf("LoadStep(no turn) = %v, %v; want the two active turns", step, err)
		} else if w, _ := step.Turn("t30"); w == nil || w.TaskToken != "tok30" {
			t.Errorf("active turn t30 = %+v, want it whole with its task token", w)
		}
		// Without a window a step reads its own turn and the active ones.
		step, _, err := s.LoadStep(ctx, cid, record.Query{TurnID: "t59"})
		if err != nil || len(step.Turns) != 3 {
			t.Errorf("LoadStep(t59, no window) = %d turns, %v; want t59, t00 and t30", len(step.Turns), err)
		}
		if own, _ := step.Turn("t59"); own == nil || len(own.History) != 1 || own.Text != "request t59" {
			t.Errorf("own turn = %+v, want it whole", own)
		}
	})
}

// Issue 13: a step reads the newest artifacts of a long catalog and the
// turn's own; any other is found by id.
func TestLoadStepReadsTheNewestArtifacts(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		cid := create(t, s, valkeytest.ID(t, "u"))
		ctx := t.Context()
		var uploads []artifact.Artifact
		for i := range 120 {
			uploads = append(uploads, artifact.Artifact{ID: fmt.Sprintf("art_%03d", i), Name: fmt.Sprint(i), CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
		}
		if err := s.PutArtifacts(ctx, cid, uploads...); err != nil {
			t.Fatal(err)
		}
		tr := progress(1, 0)
		tr.Files = []string{"art_003"}
		tr.Produced = []string{"art_new"}
		tr.History = append(tr.History, record.HistoryEntry{Role: "tool", Tool: "make_png", Status: record.ResultSucceeded, ToolInputs: map[string]any{"word": "Popelnase"}, At: t0})
		if err := s.SaveTurn(ctx, cid, tr, artifact.Artifact{ID: "art_new", CreatedAt: t0.Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		step, _, err := s.LoadStep(ctx, cid, record.Query{TurnID: tr.ID, Artifacts: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, a := range step.Artifacts {
			got[a.ID] = true
		}
		if len(step.Artifacts) != 12 || !got["art_119"] || !got["art_110"] || got["art_109"] || !got["art_003"] || !got["art_new"] {
			t.Errorf("LoadStep artifacts = %v, want the newest 10 and the turn's two", got)
		}
		if step.ArtifactTotal != 121 {
			t.Errorf("ArtifactTotal = %d, want 121", step.ArtifactTotal)
		}
		if len(step.Inputs) != 1 {
			t.Errorf("LoadStep inputs = %v, want make_png's", step.Inputs)
		}
		arts, err := s.Artifacts(ctx, cid, "art_050", "art_nope")
		if err != nil || len(arts) != 1 || arts[0].ID != "art_050" {
			t.Errorf("Artifacts(art_050, art_nope) = %v, %v; want art_050 only", arts, err)
		}
		// A reader that needs only the conversation and its turns (an
		// event stream that opens) reads no catalog: the running turn and
		// the owner, none of the 121 entries, nor the skills' inputs.
		lean, _, err := s.LoadStep(ctx, cid, record.Query{Artifacts: record.NoCatalog})
		if err != nil {
			t.Fatal(err)
		}
		if running, _ := lean.Turn(tr.ID); running == nil || lean.Meta.ID != cid || lean.Meta.Owner == "" {
			t.Errorf("LoadStep(NoCatalog) = meta %+v, turns %v; want the meta and the running turn", lean.Meta, lean.Turns)
		}
		if len(lean.Artifacts) != 0 || lean.ArtifactTotal != 0 || len(lean.Inputs) != 0 {
			t.Errorf("LoadStep(NoCatalog) read %d artifacts (of %d) and %d inputs, want none", len(lean.Artifacts), lean.ArtifactTotal, len(lean.Inputs))
		}
	})
}

// A conversation stored before turns were indexed is migrated by its first
// step and loses nothing.
func TestLoadStepMigratesTheOldLayout(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		cid := valkeytest.ID(t, "c")
		ctx := t.Context()
		t.Cleanup(func() { _ = s.Delete(ctx, cid) })
		ck := "conv:{" + cid + "}"
		old := map[string]any{"meta": fmt.Sprintf(`{"conversation_id":%q,"owner":"dev","created_at":"2026-09-30T12:00:00Z"}`, cid)}
		for i := range 3 {
			tr := finished(i)
			b, _ := jsonMarshal(tr)
			old["turn:"+tr.ID] = b
		}
		if err := c.HSet(ctx, ck, old).Err(); err != nil {
			t.Fatal(err)
		}
		step, _, err := s.LoadStep(ctx, cid, record.Query{TurnID: "t02", Window: 80})
		if err != nil {
			t.Fatalf("LoadStep() = %v", err)
		}
		if len(step.Turns) != 3 || len(step.LLMView("t02", 80)) != 9 {
			t.Errorf("migrated step = %d turns, view %d entries; want 3 and 9", len(step.Turns), len(step.LLMView("t02", 80)))
		}
		if v := c.HGet(ctx, ck, "layout").Val(); v != "2" {
			t.Errorf("layout after migration = %q, want 2", v)
		}
	})
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
