package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

var t0 = time.Date(2026, 9, 30, 12, 0, 0, 0, time.UTC)

func create(t *testing.T, s *valkey.Store, owner string) string {
	t.Helper()
	cid := valkeytest.ID(t, "c")
	if err := s.Create(t.Context(), record.Meta{ID: cid, Owner: owner, CreatedAt: t0}); err != nil {
		t.Fatalf("Create() = %v", err)
	}
	// t.Context is done during cleanup; a real server must not keep test keys.
	t.Cleanup(func() {
		_ = s.Delete(context.Background(), cid)
		_, _ = s.List(context.Background(), owner) // prunes the owner index
	})
	return cid
}

// progress returns turn i as it looks after `step` steps: a user message,
// then per step an assistant call and its result.
func progress(i, step int) *record.Turn {
	id := fmt.Sprintf("t%02d", i)
	tr := &record.Turn{
		ID: id, StartedAt: t0.Add(time.Duration(i) * time.Second), UpdatedAt: t0.Add(time.Duration(i*100+step) * time.Millisecond),
		Status: record.StatusRunning, Text: "request " + id,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "request " + id}},
	}
	for s := range step {
		cid := fmt.Sprintf("%s-c%d", id, s)
		tr.Messages = append(tr.Messages,
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: cid, Name: "x", Arguments: "{}"}}},
			llm.ToolResultMessage(cid, "ok "+cid))
	}
	return tr
}

// askingOne returns turn i after one step, then asking for one more call
// (tool1), validated and ready: the batch of one call the store starts
// and appends with the call's write. It returns the call's id.
func askingOne(i int) (*record.Turn, string) {
	tr := progress(i, 1)
	call := tr.ID + "-call"
	tr.Messages = append(tr.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: call, Name: "tool1", Arguments: "{}"}}})
	tr.Pending = []record.PendingCall{{CallID: call, Tool: "tool1", State: record.CallReady}}
	return tr, call
}

// docs/design.md §4 / docs/design.md §3.4a: concurrent turns cannot lose each other's messages.
func TestConcurrentTurnsLoseNothing(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		cid := create(t, s, valkeytest.ID(t, "u"))
		const turns, steps = 20, 5
		var wg sync.WaitGroup
		errs := make(chan error, turns*steps)
		for i := range turns {
			wg.Go(func() {
				for step := 0; step <= steps; step++ {
					art := artifact.Artifact{ID: fmt.Sprintf("a%d-%d", i, step), TurnID: fmt.Sprintf("t%02d", i), CreatedAt: t0}
					if err := s.SaveTurn(t.Context(), cid, progress(i, step), art); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("SaveTurn() = %v", err)
		}
		conv, _, err := s.Load(t.Context(), cid, "")
		if err != nil {
			t.Fatalf("Load() = %v", err)
		}
		if len(conv.Turns) != turns {
			t.Fatalf("Load() has %d turns, want %d", len(conv.Turns), turns)
		}
		var want []llm.Message
		for i := range turns {
			if diff := cmp.Diff(progress(i, steps), conv.Turns[i]); diff != "" {
				t.Errorf("Load() turn %d (-want +got):\n%s", i, diff)
			}
			want = append(want, progress(i, steps).Messages...)
		}
		if diff := cmp.Diff(want, conv.LLMView("", 0)); diff != "" {
			t.Errorf("LLMView() after concurrent saves (-want +got):\n%s", diff)
		}
		if got, want := len(conv.Artifacts), turns*(steps+1); got != want {
			t.Errorf("Load() has %d artifacts, want %d", got, want)
		}
		if !strings.HasPrefix(conv.Meta.Title, "request t") { // the first turn saved wins the title
			t.Errorf("Load() title = %q, want a turn's text", conv.Meta.Title)
		}
		if want := t0.Add(19*100*time.Millisecond + 5*time.Millisecond); !conv.Meta.UpdatedAt.Equal(want) {
			t.Errorf("Load() updated = %v, want %v", conv.Meta.UpdatedAt, want)
		}
	})
}

// The invoke step's HSETNX: under a race exactly one outcome is stored.
func TestPutOutcomeOnce(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		cid := create(t, s, valkeytest.ID(t, "u"))
		const n = 16
		var wg sync.WaitGroup
		stored := make(chan string, n)
		for i := range n {
			wg.Go(func() {
				o := record.CallOutcome{CallID: "call1", Tool: "x", Result: record.ToolResult{Status: record.ResultSucceeded, Summary: fmt.Sprint(i)}}
				put, err := s.PutOutcome(t.Context(), cid, "t1", o)
				if err != nil {
					t.Errorf("PutOutcome() = %v", err)
				}
				if put.Stored {
					stored <- o.Result.Summary
				}
			})
		}
		wg.Wait()
		close(stored)
		var winners []string
		for w := range stored {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("PutOutcome() stored %d times, want 1", len(winners))
		}
		if _, out, err := s.Load(t.Context(), cid, "t1"); err != nil || out["call1"].Result.Summary != winners[0] || len(out) != 1 {
			t.Errorf("Load(t1) outcomes = %v, %v; want the single winner %q", out, err, winners[0])
		}
		if err := s.DeleteOutcome(t.Context(), cid, "t1", "call1"); err != nil {
			t.Fatalf("DeleteOutcome() = %v", err)
		}
		if ok, err := s.PutOutcome(t.Context(), cid, "t1", record.CallOutcome{CallID: "call1"}); err != nil || !ok.Stored {
			t.Errorf("PutOutcome() after DeleteOutcome = %v, %v; want true, nil", ok, err)
		}
	})
}

func TestLoadMissing(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		cid := valkeytest.ID(t, "missing")
		if _, _, err := s.Load(t.Context(), cid, ""); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("Load(missing) = %v, want ErrNotFound", err)
		}
		// A step still running for a conversation that is gone (deleted or
		// expired) writes nothing: the deleted record never comes back.
		if _, err := s.PutOutcome(t.Context(), cid, "t", record.CallOutcome{CallID: "x"}); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("PutOutcome(missing) = %v, want ErrNotFound", err)
		}
		if err := s.SaveTurn(t.Context(), cid, progress(1, 0)); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("SaveTurn(missing) = %v, want ErrNotFound", err)
		}
		if n, err := c.Exists(t.Context(), "conv:{"+cid+"}", "conv:{"+cid+"}:results:t").Result(); err != nil || n != 0 {
			t.Errorf("keys after writes to a missing conversation = %d, %v; want none", n, err)
		}
		if _, _, err := s.Load(t.Context(), cid, "t"); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("Load(no meta) = %v, want ErrNotFound", err)
		}
		_ = s.Delete(t.Context(), cid)
	})
}

func TestListOrder(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		owner, other := valkeytest.ID(t, "u"), valkeytest.ID(t, "o")
		a, b, x := create(t, s, owner), create(t, s, owner), create(t, s, other)
		// a is updated after b, so a lists first.
		ta := &record.Turn{ID: "t1", StartedAt: t0, UpdatedAt: t0.Add(2 * time.Hour), Text: "older conversation, newer turn"}
		tb := &record.Turn{ID: "t1", StartedAt: t0, UpdatedAt: t0.Add(time.Hour), Text: "newer"}
		for cid, tr := range map[string]*record.Turn{a: ta, b: tb, x: tb} {
			if err := s.SaveTurn(t.Context(), cid, tr); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.List(t.Context(), owner)
		if err != nil {
			t.Fatalf("List() = %v", err)
		}
		want := []record.Meta{
			{ID: a, Owner: owner, CreatedAt: t0, Title: ta.Text, UpdatedAt: ta.UpdatedAt},
			{ID: b, Owner: owner, CreatedAt: t0, Title: tb.Text, UpdatedAt: tb.UpdatedAt},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("List() (-want +got):\n%s", diff)
		}
		if got, err := s.List(t.Context(), valkeytest.ID(t, "nobody")); err != nil || len(got) != 0 {
			t.Errorf("List(nobody) = %v, %v; want empty", got, err)
		}
		for _, cid := range []string{a, b, x} {
			_ = s.Delete(t.Context(), cid)
		}
	})
}

func TestDeleteRemovesEveryKey(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		owner := valkeytest.ID(t, "u")
		cid := create(t, s, owner)
		for i := range 3 {
			tr := progress(i, 1)
			if err := s.SaveTurn(t.Context(), cid, tr, artifact.Artifact{ID: fmt.Sprint("a", i)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutOutcome(t.Context(), cid, tr.ID, record.CallOutcome{CallID: "c"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PutOutcome(t.Context(), cid, "never-saved", record.CallOutcome{CallID: "c"}); err != nil {
			t.Fatal(err)
		}
		keys := []string{"conv:{" + cid + "}", "conv:{" + cid + "}:artifacts", "conv:{" + cid + "}:results:t00", "conv:{" + cid + "}:results:t02", "conv:{" + cid + "}:results:never-saved",
			"conv:{" + cid + "}:turns", "conv:{" + cid + "}:active", "conv:{" + cid + "}:artorder"}
		if n := c.Exists(t.Context(), keys...).Val(); n != int64(len(keys)) {
			t.Fatalf("before Delete: %d of %d keys exist", n, len(keys))
		}
		if err := s.Delete(t.Context(), cid); err != nil {
			t.Fatalf("Delete() = %v", err)
		}
		if n := c.Exists(t.Context(), keys...).Val(); n != 0 {
			t.Errorf("after Delete: %d keys remain, want 0", n)
		}
		if _, _, err := s.Load(t.Context(), cid, ""); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("Load() after Delete = %v, want ErrNotFound", err)
		}
		if got, err := s.List(t.Context(), owner); err != nil || len(got) != 0 {
			t.Errorf("List() after Delete = %v, %v; want empty", got, err)
		}
		if n := c.ZCard(t.Context(), "user:{"+owner+"}:convs").Val(); n != 0 {
			t.Errorf("owner index after Delete and List has %d entries, want 0 (pruned)", n)
		}
	})
}

// A call a step starts after its conversation was deleted does not start,
// and writes nothing back.
func TestStartCallAfterDelete(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		cid := create(t, s, valkeytest.ID(t, "u"))
		tr := progress(0, 1)
		if err := s.SaveTurn(t.Context(), cid, tr); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(t.Context(), cid); err != nil {
			t.Fatal(err)
		}
		ok, err := s.StartCall(t.Context(), cid, tr.ID, "c", record.Event{Type: record.EventStepStarted, TurnID: tr.ID})
		if err != nil || ok {
			t.Errorf("StartCall() after Delete = %v, %v; want false", ok, err)
		}
		if n := c.Exists(t.Context(), "conv:{"+cid+"}", "conv:{"+cid+"}:results:"+tr.ID, "conv:{"+cid+"}:events").Val(); n != 0 {
			t.Errorf("StartCall after Delete wrote %d keys back, want none", n)
		}
	})
}

// Keys expire after the idle time, refreshed by every write, and carry no
// TTL while a turn is active.
func TestIdleExpiry(t *testing.T) {
	t.Parallel()
	mr, c := valkeytest.Embedded(t)
	ttl := time.Hour
	s := valkey.New(c, valkey.Options{IdleTTL: ttl})
	owner := "u"
	cid := create(t, s, owner)
	ck, ak, rk := "conv:{"+cid+"}", "conv:{"+cid+"}:artifacts", "conv:{"+cid+"}:results:t00"
	if got := mr.TTL(ck); got != ttl {
		t.Errorf("TTL(conv) after Create = %v, want %v", got, ttl)
	}
	mr.FastForward(40 * time.Minute)
	// An active conversation is never evictable (a cache at its cap evicts
	// only keys with a TTL): while its turn runs, its keys carry none.
	tr := progress(0, 0)
	if err := s.SaveTurn(t.Context(), cid, tr, artifact.Artifact{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutOutcome(t.Context(), cid, "t00", record.CallOutcome{CallID: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkAnswered(t.Context(), cid, "t00", "tok"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSpend(t.Context(), cid, "t00", record.Spend{Calls: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutArtifacts(t.Context(), cid, artifact.Artifact{ID: "up"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{ck, ak, rk} {
		if got := mr.TTL(k); got != 0 {
			t.Errorf("TTL(%s) while the turn runs = %v, want none", k, got)
		}
	}
	// A later write of the running turn (with a new artifact) finds the
	// keys without a TTL and leaves every key of the conversation so.
	if err := s.SaveTurn(t.Context(), cid, tr, artifact.Artifact{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range mr.Keys() {
		if strings.HasPrefix(k, "conv:{"+cid+"}") && k != "conv:{"+cid+"}:events" {
			if got := mr.TTL(k); got != 0 {
				t.Errorf("TTL(%s) after the running turn's second write = %v, want none", k, got)
			}
		}
	}
	// The idle TTL starts when the last turn ends.
	tr.Status = record.StatusSucceeded
	if err := s.SaveTurn(t.Context(), cid, tr); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{ck, ak, rk, "user:{u}:convs"} {
		if got := mr.TTL(k); got != ttl && !(k == "user:{u}:convs" && got == ttl-40*time.Minute) {
			t.Errorf("TTL(%s) = %v, want %v", k, got, ttl)
		}
	}
	mr.FastForward(ttl + time.Second)
	if _, _, err := s.Load(t.Context(), cid, ""); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("Load() after idle expiry = %v, want ErrNotFound", err)
	}
}

// The embedded server lives in pkg/record/valkey/embedded (the local
// stack's alone); Open needs a URL.
func TestOpenNeedsURL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, _, err := valkey.Open(ctx, ""); !errors.Is(err, valkey.ErrNoURL) {
		t.Errorf(`Open("") = %v, want ErrNoURL`, err)
	}
	if _, _, err := valkey.Open(ctx, "http://nope"); err == nil {
		t.Errorf("Open(http://nope) = nil error, want an error")
	}
	if _, _, err := valkey.Open(ctx, "redis://127.0.0.1:1/0"); err == nil {
		t.Errorf("Open(closed port) = nil error, want an error")
	}
}

func TestOpenReal(t *testing.T) {
	t.Parallel()
	_ = valkeytest.Real(t) // skips without VALKEY_URL
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, closeFn, err := valkey.Open(ctx, os.Getenv(valkeytest.EnvURL))
	if err != nil {
		t.Fatalf("Open(VALKEY_URL) = %v", err)
	}
	defer closeFn()
	s := valkey.New(c, valkey.Options{})
	owner := valkeytest.ID(t, "u")
	cid := create(t, s, owner)
	if _, _, err := s.Load(ctx, cid, ""); err != nil {
		t.Errorf("Load() through Open's client = %v", err)
	}
	// Clean up before closeFn: the cleanup would find the client closed.
	if err := s.Delete(ctx, cid); err != nil {
		t.Errorf("Delete() = %v", err)
	}
	if got, err := s.List(ctx, owner); err != nil || len(got) != 0 {
		t.Errorf("List() after Delete = %v, %v; want empty", got, err)
	}
}

// docs/design.md §3.4a concurrent turns: the list shows the newest turn's status,
// so an older turn that ends while a newer one runs does not hide it.
func TestListStatusIsTheNewestTurns(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		owner := valkeytest.ID(t, "u")
		cid := create(t, s, owner)
		t.Cleanup(func() { _ = s.Delete(context.Background(), cid) })
		older := &record.Turn{ID: "t1", StartedAt: t0, UpdatedAt: t0, Status: record.StatusRunning, Text: "first"}
		newer := &record.Turn{ID: "t2", StartedAt: t0.Add(time.Second), UpdatedAt: t0.Add(time.Second), Status: record.StatusRunning, Text: "second"}
		status := func() record.Status {
			t.Helper()
			got, err := s.List(t.Context(), owner)
			if err != nil || len(got) != 1 {
				t.Fatalf("List() = %v, %v", got, err)
			}
			return got[0].Status
		}
		for _, step := range []struct {
			turn   *record.Turn
			status record.Status
			want   record.Status
		}{
			{older, record.StatusRunning, record.StatusRunning},
			{newer, record.StatusRunning, record.StatusRunning},
			{older, record.StatusSucceeded, record.StatusRunning}, // the older turn ends later
			{newer, record.StatusFailed, record.StatusFailed},
		} {
			step.turn.Status = step.status
			step.turn.UpdatedAt = step.turn.UpdatedAt.Add(time.Minute)
			if err := s.SaveTurn(t.Context(), cid, step.turn); err != nil {
				t.Fatal(err)
			}
			if got := status(); got != step.want {
				t.Errorf("after saving %s as %s: list status = %s, want %s", step.turn.ID, step.status, got, step.want)
			}
		}
	})
}

// Issue 29: a step's provider spend rides on the write that saves its
// turn (one round trip): it is added to the turn's counters with the turn,
// and counted even when the write is refused because the turn was
// cancelled meanwhile; its events go to the log before the write's own.
func TestSaveTurnCarriesTheSpend(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		cid := create(t, s, "u")
		tr := progress(0, 1)
		tr.Spend = &record.Spend{Calls: 1, Tokens: 40, CachedTokens: 8, CostMicros: 7, WindowFrom: "t00",
			Events: []record.Event{{Type: record.EventStepEnded, TurnID: tr.ID, At: t0}}}
		tr.Events = []record.Event{{Type: record.EventArtifact, TurnID: tr.ID, At: t0}}
		if err := s.SaveTurn(ctx, cid, tr); err != nil {
			t.Fatal(err)
		}
		tr.Spend, tr.Events = &record.Spend{Calls: 1, Tokens: 2}, nil
		if err := s.SaveTurn(ctx, cid, tr); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkCancelled(ctx, cid, tr.ID); err != nil {
			t.Fatal(err)
		}
		tr.Spend = &record.Spend{Calls: 1, Tokens: 100}
		if err := s.SaveTurn(ctx, cid, tr); !errors.Is(err, record.ErrCancelled) {
			t.Fatalf("SaveTurn of a cancelled turn = %v, want ErrCancelled", err)
		}
		conv, _, err := s.LoadStep(ctx, cid, record.Query{TurnID: tr.ID})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := conv.Turn(tr.ID)
		if got.LLMCalls != 3 || got.Tokens != 142 || got.CachedTokens != 8 || got.CostMicros != 7 || conv.WindowFrom != "t00" {
			t.Errorf("counters = %d calls, %d tokens, %d cached, %d µ$, window %q; want 3, 142, 8, 7, t00",
				got.LLMCalls, got.Tokens, got.CachedTokens, got.CostMicros, conv.WindowFrom)
		}
		evs, err := s.Events(ctx, cid, "", 10, 0)
		if err != nil || len(evs) != 2 || evs[0].Type != record.EventStepEnded || evs[1].Type != record.EventArtifact {
			t.Errorf("events = %+v, %v; want the spend's step.ended, then the write's artifact", evs, err)
		}
	})
}
