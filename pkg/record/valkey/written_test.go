package valkey_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// A step reads back the turn its Store wrote without the turn's body
// crossing the wire again, and gets exactly what a fresh read decodes,
// each read a turn of its own to change; so does every read after it
// until another process or a function that keeps nothing writes the turn
// (that read gets the body), and a write the store refused is never read
// back.
func TestAStepReadsBackTheTurnItWroteWithoutItsBody(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		hook := &valkeytest.TurnBodies{}
		c.AddHook(hook)
		s := valkey.New(c, valkey.Options{ReadBack: true})
		other := valkey.New(c, valkey.Options{ReadBack: true}) // another process's Store
		cid := create(t, s, valkeytest.ID(t, "u"))
		ctx := t.Context()
		want := finished(7)
		want.Status = record.StatusRunning
		want.Steps = []record.Step{{Tool: "llm", Status: "succeeded", StartedAt: t0.Add(1234567 * time.Nanosecond), EndedAt: t0.Add(time.Second), Tokens: 9}}
		want.Pending = []record.PendingCall{{CallID: "c1", Tool: "tool1", State: record.CallReady, Arguments: map[string]any{"n": 1, "s": "x"}}}
		q := record.Query{TurnID: want.ID, Outcomes: true}
		if err := s.SaveTurn(ctx, cid, want); err != nil {
			t.Fatal(err)
		}
		fresh := func() *record.Turn {
			t.Helper()
			conv, _, err := other.LoadStep(ctx, cid, record.Query{TurnID: want.ID})
			if err != nil {
				t.Fatal(err)
			}
			tr, _ := conv.Turn(want.ID)
			return tr
		}
		read := func(load func() (*record.Conversation, error)) *record.Turn {
			t.Helper()
			conv, err := load()
			if err != nil {
				t.Fatal(err)
			}
			tr, ok := conv.Turn(want.ID)
			if !ok {
				t.Fatalf("the read lacks turn %s", want.ID)
			}
			return tr
		}
		step := func() *record.Turn {
			return read(func() (*record.Conversation, error) { c, _, err := s.LoadStep(ctx, cid, q); return c, err })
		}
		expect := func(what string, sent, kept int32) {
			t.Helper()
			if hook.Sent.Load() != sent || hook.Kept.Load() != kept {
				t.Errorf("%s: bodies sent %d, kept %d; want %d and %d", what, hook.Sent.Load(), hook.Kept.Load(), sent, kept)
			}
		}

		got := step()
		expect("the read after the write", 0, 1)
		if diff := cmp.Diff(fresh(), got); diff != "" {
			t.Errorf("the turn read back differs from a fresh read (-fresh +kept):\n%s", diff)
		}
		expect("a fresh read", 1, 1)
		got.Status = record.StatusFailed // the reader's to change
		if again := step(); again.Status != record.StatusRunning {
			t.Errorf("the second read = %s, want the stored running turn", again.Status)
		}
		expect("the second read, taken back again", 1, 2)

		// Another process writes the turn: the kept write does not stand in.
		if err := s.SaveTurn(ctx, cid, want); err != nil {
			t.Fatal(err)
		}
		changed := *want
		changed.Text = "changed elsewhere"
		if err := other.SaveTurn(ctx, cid, &changed); err != nil {
			t.Fatal(err)
		}
		if got := step(); got.Text != changed.Text {
			t.Errorf("after another process's write, read %q, want %q", got.Text, changed.Text)
		}
		expect("the read after another process's write", 2, 2)
		if got := step(); got.Text != changed.Text {
			t.Errorf("the read after that, %q, want %q", got.Text, changed.Text)
		}
		expect("the read after that, of the turn the read before it got whole", 2, 3)

		// So does a function's that keeps nothing (no ReadBack), which reads
		// the body back.
		lambda := valkey.New(c, valkey.Options{})
		if err := s.SaveTurn(ctx, cid, want); err != nil {
			t.Fatal(err)
		}
		changed.Text = "changed by a function"
		if err := lambda.SaveTurn(ctx, cid, &changed); err != nil {
			t.Fatal(err)
		}
		if got := step(); got.Text != changed.Text {
			t.Errorf("after a function's write, read %q, want %q", got.Text, changed.Text)
		}
		if _, _, err := lambda.LoadStep(ctx, cid, q); err != nil {
			t.Fatal(err)
		}
		expect("the reads after a function's write", 4, 3)

		// A write the store refused (a cancel) is never read back; the last
		// stored one still is, and the counters kept beside the turn come
		// from the store.
		if err := s.SaveTurn(ctx, cid, want); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkCancelled(ctx, cid, want.ID); err != nil {
			t.Fatal(err)
		}
		refused := *want
		refused.Text = "refused"
		refused.Spend = &record.Spend{Calls: 1, Tokens: 5}
		if err := s.SaveTurn(ctx, cid, &refused); !errors.Is(err, record.ErrCancelled) {
			t.Fatalf("SaveTurn after the cancel = %v, want ErrCancelled", err)
		}
		got = read(func() (*record.Conversation, error) {
			c, _, _, err := s.LoadStart(ctx, cid, q, record.Start{CallID: "c1"})
			return c, err
		})
		expect("LoadStart after the refused write", 4, 4)
		if got.Text != want.Text || !got.CancelRequested || got.Tokens != want.Tokens+5 {
			t.Errorf("read back after the refused write: text %q, cancel %v, tokens %d; want %q, the cancel and %d tokens", got.Text, got.CancelRequested, got.Tokens, want.Text, want.Tokens+5)
		}
		if diff := cmp.Diff(fresh(), got); diff != "" {
			t.Errorf("the turn read back differs from a fresh read (-fresh +kept):\n%s", diff)
		}
	})
}

// Whatever the order of writes and reads of one turn through Stores that
// keep what they write and one that keeps nothing, every read gets the
// turn as last stored.
func TestReadBackNeverReadsAStaleTurn(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		stores := []*valkey.Store{valkey.New(c, valkey.Options{ReadBack: true}), valkey.New(c, valkey.Options{ReadBack: true}), valkey.New(c, valkey.Options{})}
		cid := create(t, stores[0], valkeytest.ID(t, "u"))
		ctx := t.Context()
		tr := progress(1, 1)
		last := ""
		rng := rand.New(rand.NewPCG(7, 29))
		for i := range 400 {
			s := stores[rng.IntN(len(stores))]
			if rng.IntN(3) == 0 {
				tr.Text = fmt.Sprintf("write %d", i)
				if err := s.SaveTurn(ctx, cid, tr); err != nil {
					t.Fatal(err)
				}
				last = tr.Text
				continue
			}
			var conv *record.Conversation
			var err error
			if rng.IntN(2) == 0 {
				conv, _, err = s.LoadStep(ctx, cid, record.Query{TurnID: tr.ID})
			} else {
				conv, _, _, err = s.LoadStart(ctx, cid, record.Query{TurnID: tr.ID}, record.Start{CallID: "none"})
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := conv.Turn(tr.ID)
			if last != "" && (got == nil || got.Text != last) {
				t.Fatalf("op %d: read %+v, want the turn last written (%q)", i, got, last)
			}
			if got != nil {
				got.Text = "changed by the reader" // the reader's own
			}
		}
	})
}
