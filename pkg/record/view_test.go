package record

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
)

var t0 = time.Date(2026, 9, 30, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func user(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }
func asst(s string, ids ...string) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant, Content: s}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Name: "tool_" + id, Arguments: "{}"})
	}
	return m
}
func renamed(m llm.Message, id string) llm.Message {
	m.ToolCalls[0].ID = id
	return m
}
func res(id, s string) llm.Message { return llm.ToolResultMessage(id, s) }

func turn(id string, start int, st Status, msgs ...llm.Message) *Turn {
	return &Turn{ID: id, StartedAt: at(start), UpdatedAt: at(start), Status: st, Messages: msgs}
}

func TestLLMView(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		turns  []*Turn
		turnID string
		window int
		want   []llm.Message
	}{
		{
			name: "docs/design.md §3.4a: blocks ordered by turn start, stored result placed after its call",
			turns: []*Turn{
				turn("b", 20, StatusSucceeded, user("B"), asst("B done")),
				turn("a", 10, StatusSucceeded, user("A"), asst("", "c1"), res("c1", "r1"), asst("A done")),
			},
			turnID: "c-new",
			want:   []llm.Message{user("A"), asst("", "c1"), res("c1", "r1"), asst("A done"), user("B"), asst("B done")},
		},
		{
			name: "docs/design.md §4: this turn's own block comes last even though it started first",
			turns: []*Turn{
				turn("a", 10, StatusRunning, user("A"), asst("", "c1"), res("c1", "r1")),
				turn("b", 20, StatusSucceeded, user("B"), asst("B done")),
			},
			turnID: "a",
			want:   []llm.Message{user("B"), asst("B done"), user("A"), asst("", "c1"), res("c1", "r1")},
		},
		{
			name: "docs/design.md §3.4a: result stored in another turn's block moves directly after its call",
			turns: []*Turn{
				turn("a", 10, StatusSucceeded, user("A"), asst("", "c1", "c2")),
				turn("b", 20, StatusSucceeded, user("B"), res("c2", "r2"), res("c1", "r1"), asst("B done")),
			},
			turnID: "",
			want:   []llm.Message{user("A"), asst("", "c1", "c2"), res("c1", "r1"), res("c2", "r2"), user("B"), asst("B done")},
		},
		{
			name: "docs/design.md §3.4a: a finished turn's call with no result gets not executed",
			turns: []*Turn{
				turn("a", 10, StatusSuperseded, user("A"), asst("", "c1")),
				turn("b", 20, StatusRunning, user("B")),
			},
			turnID: "b",
			want:   []llm.Message{user("A"), asst("", "c1"), res("c1", notExecutedResult), user("B")},
		},
		{
			name: "docs/design.md §4: another running turn's ready call gets a still-running placeholder",
			turns: []*Turn{
				{ID: "a", StartedAt: at(10), Status: StatusRunning, Messages: []llm.Message{user("A"), asst("", "c1")},
					Pending: []PendingCall{{CallID: "c1", State: CallReady}}},
				turn("b", 20, StatusRunning, user("B")),
			},
			turnID: "b",
			want:   []llm.Message{user("A"), asst("", "c1"), res("c1", stillRunningResult), user("B")},
		},
		{
			name: "issue 12: another turn's call waiting for the user is not still running",
			turns: []*Turn{
				turn("a", 10, StatusAwaitingApproval, user("A"), asst("", "c1")),
				{ID: "c", StartedAt: at(15), Status: StatusRunning, Messages: []llm.Message{user("C"), asst("", "c3")},
					Pending: []PendingCall{{CallID: "c3", State: CallNeedsInput}}},
				turn("b", 20, StatusRunning, user("B")),
			},
			turnID: "b",
			want: []llm.Message{user("A"), asst("", "c1"), res("c1", waitingResult),
				user("C"), asst("", "c3"), res("c3", waitingResult), user("B")},
		},
		{
			name: "this turn's call without an appended result is not executed",
			turns: []*Turn{
				turn("a", 10, StatusRunning, user("A"), asst("", "c9")),
			},
			turnID: "a",
			want:   []llm.Message{user("A"), asst("", "c9"), res("c9", notExecutedResult)},
		},
		{
			name: "issue 12: two turns with one call id each keep their own call and result, whichever is stored first",
			turns: []*Turn{
				turn("a", 10, StatusSucceeded, user("A"), asst("", "call_0"), res("call_0", "ra"), asst("A done")),
				turn("b", 20, StatusRunning, user("B"), asst("", "call_0"), res("call_0", "rb")),
			},
			turnID: "b",
			want: []llm.Message{user("A"), asst("", "call_0"), res("call_0", "ra"), asst("A done"),
				user("B"), renamed(asst("", "call_0"), "call_0_b"), res("call_0_b", "rb")},
		},
		{
			name: "orphan results, duplicate results, duplicate call ids, system and empty assistant messages are dropped",
			turns: []*Turn{
				turn("a", 10, StatusSucceeded,
					llm.Message{Role: llm.RoleSystem, Content: "sys"},
					res("zz", "orphan"), user("A"), asst("", "c1", "c1", ""), res("c1", "first"), res("c1", "second"),
					asst(""), asst("again", "c1"), asst("A done")),
			},
			want: []llm.Message{user("A"), asst("", "c1"), res("c1", "first"), asst("again"), asst("A done")},
		},
		{
			name: "docs/design.md §3.6: window cuts the oldest turns at a user boundary",
			turns: []*Turn{
				turn("a", 10, StatusSucceeded, user("A"), asst("", "c1"), res("c1", "r1"), asst("A done")),
				turn("b", 20, StatusSucceeded, user("B"), asst("B done")),
				turn("c", 30, StatusRunning, user("C")),
			},
			turnID: "c",
			window: 4,
			want:   []llm.Message{user("B"), asst("B done"), user("C")},
		},
		{
			name: "docs/design.md §3.6: window never cuts inside a tool group; keeps from the last allowed user message",
			turns: []*Turn{
				turn("a", 10, StatusSucceeded, user("A"), asst("A done")),
				turn("b", 20, StatusRunning, user("B"), asst("", "c1", "c2"), res("c1", "r1"), res("c2", "r2")),
			},
			turnID: "b",
			window: 2,
			want:   []llm.Message{user("B"), asst("", "c1", "c2"), res("c1", "r1"), res("c2", "r2")},
		},
		{
			name: "docs/design.md §3.6: window drops a newer other turn but keeps this turn's own block whole",
			turns: []*Turn{
				turn("a", 10, StatusRunning, user("A"), asst("", "c1"), res("c1", "r1")),
				turn("b", 20, StatusSucceeded, user("B"), asst("B1"), asst("B2"), asst("B3")),
			},
			turnID: "a",
			window: 4,
			want:   []llm.Message{user("A"), asst("", "c1"), res("c1", "r1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Assemble(Meta{ID: "x"}, tt.turns, nil)
			got := c.LLMView(tt.turnID, tt.window)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LLMView(%q) mismatch (-want +got):\n%s", tt.turnID, diff)
			}
			if err := checkProviderInvariant(got); err != "" {
				t.Errorf("LLMView(%q) breaks the provider invariant: %s", tt.turnID, err)
			}
		})
	}
}

func TestAssemble(t *testing.T) {
	t.Parallel()
	long := ""
	for range 100 {
		long += "é"
	}
	c := Assemble(Meta{ID: "x", CreatedAt: at(0)},
		[]*Turn{
			{ID: "b", StartedAt: at(5), UpdatedAt: at(50), Text: "second"},
			{ID: "a2", StartedAt: at(1), UpdatedAt: at(2), Text: long},
			{ID: "a1", StartedAt: at(1), UpdatedAt: at(3)},
		},
		[]artifact.Artifact{{ID: "z", CreatedAt: at(1)}, {ID: "y", CreatedAt: at(2)}, {ID: "x", CreatedAt: at(1)}})
	var ids, arts []string
	for _, tt := range c.Turns {
		ids = append(ids, tt.ID)
	}
	for _, a := range c.Artifacts {
		arts = append(arts, a.ID)
	}
	if diff := cmp.Diff([]string{"a1", "a2", "b"}, ids); diff != "" {
		t.Errorf("Assemble() turn order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"x", "z", "y"}, arts); diff != "" {
		t.Errorf("Assemble() artifact order (-want +got):\n%s", diff)
	}
	if want := long[:2*79] + "…"; c.Meta.Title != want {
		t.Errorf("Assemble() title = %q, want %q", c.Meta.Title, want)
	}
	if !c.Meta.UpdatedAt.Equal(at(50)) {
		t.Errorf("Assemble() updated = %v, want %v", c.Meta.UpdatedAt, at(50))
	}
	if tr, ok := c.Turn("b"); !ok || tr.Text != "second" {
		t.Errorf("Turn(b) = %v, %v, want the turn with text second", tr, ok)
	}
	if _, ok := c.Turn("nope"); ok {
		t.Errorf("Turn(nope) found, want not found")
	}
}

// docs/design.md §3.5: recent_skill_inputs come from conversation_history of every turn, newest wins.
func TestRecentSkillInputs(t *testing.T) {
	t.Parallel()
	h := func(tool, status string, sec int, holes int) HistoryEntry {
		return HistoryEntry{Role: "tool", Kind: KindToolResult, Tool: tool, Status: status, At: at(sec), ToolInputs: map[string]any{"holes": holes}}
	}
	c := Assemble(Meta{}, []*Turn{
		{ID: "b", StartedAt: at(20), History: []HistoryEntry{h("valve", ResultSucceeded, 21, 4), h("valve", ResultFailed, 25, 9), h("gear", ResultSucceeded, 22, 1)}},
		{ID: "a", StartedAt: at(10), History: []HistoryEntry{h("valve", ResultSucceeded, 11, 2), h("pipe", ResultSucceeded, 12, 3), {Tool: "x", Status: ResultSucceeded}}},
	}, nil)
	want := map[string]map[string]any{"valve": {"holes": 4}, "gear": {"holes": 1}, "pipe": {"holes": 3}}
	if diff := cmp.Diff(want, c.RecentSkillInputs()); diff != "" {
		t.Errorf("RecentSkillInputs() (-want +got):\n%s", diff)
	}
}

// docs/design.md §3.4a restore fidelity.
func TestStampTurnArtifacts(t *testing.T) {
	t.Parallel()
	a1 := artifact.Artifact{ID: "a1", Name: "one.svg", MimeType: "image/svg+xml", TurnID: "t", CreatedAt: at(5)}
	a2 := artifact.Artifact{ID: "a2", Name: "two.png", MimeType: "image/png", TurnID: "t", CreatedAt: at(15)}
	a3 := artifact.Artifact{ID: "a3", Name: "late.png", MimeType: "image/png", TurnID: "t", CreatedAt: at(40)}
	hist := []HistoryEntry{
		{Role: "user", Kind: KindMessage, Content: "make a valve", At: at(0)},
		{Role: "tool", Kind: KindToolResult, Tool: "svg", Status: ResultSucceeded, At: at(6), Artifacts: []artifact.Ref{a1.Ref()}},
		{Role: "assistant", Kind: KindPlan, Content: "I will convert it. Approve?", At: at(10)},
		{Role: "user", Kind: KindPlanApproved, Content: "yes", At: at(12)},
		{Role: "assistant", Kind: KindMessage, Content: "Here is the PNG.", At: at(20)},
	}
	tests := []struct {
		name  string
		final bool
		want  [][]string // artifact ids per entry
	}{
		{"pause entry carries artifacts made before it; later ones go on the answer", false,
			[][]string{nil, {"a1"}, {"a1"}, nil, {"a2"}}},
		{"a final turn puts artifacts newer than every reply on the last reply", true,
			[][]string{nil, {"a1"}, {"a1"}, nil, {"a2", "a3"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := StampTurnArtifacts(hist, []artifact.Artifact{a3, a2, a1}, tt.final)
			var ids [][]string
			for _, e := range got {
				var row []string
				for _, r := range e.Artifacts {
					row = append(row, r.ID)
				}
				ids = append(ids, row)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("StampTurnArtifacts() artifacts (-want +got):\n%s", diff)
			}
			if got[3].Content != "" {
				t.Errorf("StampTurnArtifacts() plan_approved content = %q, want empty", got[3].Content)
			}
			if hist[2].Artifacts != nil || hist[3].Content != "yes" {
				t.Errorf("StampTurnArtifacts() modified its input")
			}
		})
	}
}

// The placeholder results are the compact JSON of the ToolResult each
// says, as every stored result is.
func TestPlaceholderResultsAreToolResults(t *testing.T) {
	for _, c := range []struct {
		got  string
		want ToolResult
	}{
		{notExecutedResult, ToolResult{Status: ResultNotExecuted, Summary: "This call was not executed."}},
		{stillRunningResult, ToolResult{Status: ResultNotExecuted, Summary: "This call is still running in another turn; its result will appear later."}},
		{waitingResult, ToolResult{Status: ResultNotExecuted, Summary: "This call is waiting for the user's answer in another turn; it may never run."}},
		{runningAfterCancelResult, ToolResult{Status: CallRunningStatus,
			Summary: "This call had started when its turn was cancelled and is still running; its result will appear when it ends. Do not assume it did not run."}},
	} {
		b, err := json.Marshal(c.want)
		if err != nil || string(b) != c.got {
			t.Errorf("placeholder %s, want %s (%v)", c.got, b, err)
		}
	}
}
