package valkey_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// withCall is turn 0 after one step, its call "call" in state st and the
// turn in status status.
func withCall(st record.CallState, status record.Status) *record.Turn {
	tr := progress(0, 1)
	tr.Status = status
	tr.Pending = []record.PendingCall{{CallID: "other", Tool: "x", State: record.CallReady}, {CallID: "call", Tool: "x", State: st}}
	return tr
}

// readyCall is a store on c with a conversation whose turn t00 has its
// call "call" ready.
func readyCall(t *testing.T, c redis.UniversalClient) (*valkey.Store, string) {
	t.Helper()
	s := valkey.New(c, valkey.Options{})
	cid := create(t, s, valkeytest.ID(t, "u"))
	if err := s.SaveTurn(t.Context(), cid, withCall(record.CallReady, record.StatusRunning)); err != nil {
		t.Fatal(err)
	}
	return s, cid
}

// startOf is the start of callID with its step.started.
func startOf(callID string) record.Start {
	return record.Start{CallID: callID, Events: []record.Event{{Type: record.EventStepStarted, TurnID: "t00",
		Data: map[string]any{"tool": record.CallTool, "call_id": callID}}}}
}

// docs/design.md §3.3: an invoke reads its turn and starts its call in one
// atomic step, and the call starts only when it may run — ready in a turn
// that has not ended, or running (started before a cancel, resumed) — and
// has no outcome yet. What the step reads is what LoadStep reads.
func TestLoadStartStartsOnlyACallThatMayRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		turn    *record.Turn
		prepare func(t *testing.T, s *valkey.Store, cid string)
		callID  string
		want    bool
	}{
		{name: "ready call of a running turn", turn: withCall(record.CallReady, record.StatusRunning), callID: "call", want: true},
		{name: "call awaiting approval", turn: withCall(record.CallNeedsApproval, record.StatusAwaitingApproval), callID: "call"},
		{name: "call awaiting a form", turn: withCall(record.CallNeedsInput, record.StatusAwaitingInput), callID: "call"},
		{name: "rejected call", turn: withCall(record.CallRejected, record.StatusRunning), callID: "call"},
		{name: "ready call of a failed turn", turn: withCall(record.CallReady, record.StatusFailed), callID: "call"},
		{name: "ready call of an expired turn", turn: withCall(record.CallReady, record.StatusExpired), callID: "call"},
		{name: "unknown call", turn: withCall(record.CallReady, record.StatusRunning), callID: "nope"},
		{name: "ready call of a turn marked cancelled", turn: withCall(record.CallReady, record.StatusRunning), callID: "call",
			prepare: func(t *testing.T, s *valkey.Store, cid string) {
				if _, err := s.MarkCancelled(t.Context(), cid, "t00"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "call with a stored outcome", turn: withCall(record.CallReady, record.StatusRunning), callID: "call",
			prepare: func(t *testing.T, s *valkey.Store, cid string) {
				if _, err := s.PutOutcome(t.Context(), cid, "t00", record.CallOutcome{CallID: "call", Tool: "x", Result: record.ToolResult{Status: record.ResultSucceeded}}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "running call of a cancelled turn, started before the cancel", turn: withCall(record.CallRunning, record.StatusCancelled), callID: "call", want: true,
			prepare: func(t *testing.T, s *valkey.Store, cid string) {
				if ok, err := s.StartCall(t.Context(), cid, "t00", "call"); err != nil || !ok {
					t.Fatalf("StartCall() = %v, %v", ok, err)
				}
				if _, err := s.MarkCancelled(t.Context(), cid, "t00"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "ready call started before (a retried invoke)", turn: withCall(record.CallReady, record.StatusRunning), callID: "call", want: true,
			prepare: func(t *testing.T, s *valkey.Store, cid string) {
				if ok, err := s.StartCall(t.Context(), cid, "t00", "call"); err != nil || !ok {
					t.Fatalf("StartCall() = %v, %v", ok, err)
				}
			}},
	}
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cid := create(t, s, valkeytest.ID(t, "u"))
				if err := s.SaveTurn(t.Context(), cid, tc.turn); err != nil {
					t.Fatal(err)
				}
				if tc.prepare != nil {
					tc.prepare(t, s, cid)
				}
				q := record.Query{TurnID: "t00", Outcomes: true}
				wantConv, wantOutcomes, err := s.LoadStep(t.Context(), cid, q)
				if err != nil {
					t.Fatal(err)
				}
				startedBefore := startedCalls(t, s, c, cid)
				logged := len(events(t, s, cid))
				conv, outcomes, started, err := s.LoadStart(t.Context(), cid, q, startOf(tc.callID))
				if err != nil {
					t.Fatalf("LoadStart() = %v", err)
				}
				if started != tc.want {
					t.Errorf("LoadStart() started = %v, want %v", started, tc.want)
				}
				if d := cmp.Diff(wantConv, conv); d != "" {
					t.Errorf("LoadStart() read differs from LoadStep (-LoadStep +LoadStart):\n%s", d)
				}
				if d := cmp.Diff(wantOutcomes, outcomes); d != "" {
					t.Errorf("LoadStart() outcomes differ from LoadStep (-LoadStep +LoadStart):\n%s", d)
				}
				// The store records a start only for a call that started.
				after := startedCalls(t, s, c, cid)
				wantAfter := startedBefore
				if tc.want && !slices.Contains(wantAfter, tc.callID) {
					wantAfter = append(wantAfter, tc.callID)
				}
				slices.Sort(after)
				slices.Sort(wantAfter)
				if !slices.Equal(after, wantAfter) {
					t.Errorf("started calls after LoadStart = %v, want %v", after, wantAfter)
				}
				// The call's step.started is written with its start, naming
				// its tool; nothing is written for a call that did not start.
				evs := events(t, s, cid)[logged:]
				var want []string
				if tc.want {
					want = []string{`step.started {"call_id":"call","tool":"x"}`}
				}
				if d := cmp.Diff(want, evs); d != "" {
					t.Errorf("events written by LoadStart (-want +got):\n%s", d)
				}
			})
		}
	})
}

// events is cid's event log, each event as its type and data.
func events(t *testing.T, s *valkey.Store, cid string) []string {
	t.Helper()
	evs, err := s.Events(t.Context(), cid, "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		b, _ := json.Marshal(e.Fields())
		out = append(out, e.Type+" "+string(b))
	}
	return out
}

// A head written before heads named their calls' tools: the call starts,
// and its step.started is written with the tool of the turn's record.
func TestLoadStartOfAnOlderHead(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s, cid := readyCall(t, c)
		old := `{"turn_id":"t00","started_at":"2026-09-30T12:00:00Z","status":"running","pending":[{"call_id":"other","state":"ready"},{"call_id":"call","state":"ready"}]}`
		if err := c.HSet(t.Context(), "conv:{"+cid+"}", "head:t00", old).Err(); err != nil {
			t.Fatal(err)
		}
		_, _, started, err := s.LoadStart(t.Context(), cid, record.Query{TurnID: "t00", Outcomes: true}, startOf("call"))
		if err != nil || !started {
			t.Fatalf("LoadStart() = %v, %v; want started", started, err)
		}
		if d := cmp.Diff([]string{`step.started {"call_id":"call","tool":"x"}`}, events(t, s, cid)); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
	})
}

// startedCalls is what the results hash of turn t00 records as started.
func startedCalls(t *testing.T, s *valkey.Store, c redis.UniversalClient, cid string) []string {
	t.Helper()
	fields, err := c.HKeys(t.Context(), "conv:{"+cid+"}:results:t00").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range fields {
		if id, ok := strings.CutPrefix(f, "start:"); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// A conversation deleted before the step's read: not found, and nothing
// written back.
func TestLoadStartAfterDelete(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s, cid := readyCall(t, c)
		if err := s.Delete(t.Context(), cid); err != nil {
			t.Fatal(err)
		}
		_, _, started, err := s.LoadStart(t.Context(), cid, record.Query{TurnID: "t00", Outcomes: true}, record.Start{CallID: "call"})
		if !errors.Is(err, record.ErrNotFound) || started {
			t.Errorf("LoadStart() after Delete = %v, %v; want ErrNotFound", started, err)
		}
		if n := c.Exists(t.Context(), "conv:{"+cid+"}", "conv:{"+cid+"}:results:t00").Val(); n != 0 {
			t.Errorf("LoadStart after Delete wrote %d keys back, want none", n)
		}
	})
}

// docs/design.md §3.3: a call's start and a cancel are ordered in the
// store. Raced many times, either the call started and the cancel lists it
// as running, or it did not start and the cancel does not list it.
func TestLoadStartRacingACancel(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		for i := range 40 {
			cid := create(t, s, valkeytest.ID(t, fmt.Sprintf("u%d", i)))
			if err := s.SaveTurn(t.Context(), cid, withCall(record.CallReady, record.StatusRunning)); err != nil {
				t.Fatal(err)
			}
			var (
				wg      sync.WaitGroup
				started bool
				listed  []string
				errs    [2]error
			)
			wg.Go(func() {
				_, _, started, errs[0] = s.LoadStart(t.Context(), cid, record.Query{TurnID: "t00", Outcomes: true}, record.Start{CallID: "call"})
			})
			wg.Go(func() { listed, errs[1] = s.MarkCancelled(t.Context(), cid, "t00") })
			wg.Wait()
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("LoadStart, MarkCancelled = %v, %v", errs[0], errs[1])
			}
			if started != slices.Contains(listed, "call") {
				t.Fatalf("race %d: LoadStart started = %v, but MarkCancelled listed %v", i, started, listed)
			}
		}
	})
}

// docs/design.md §3.6: an outcome counts its files against the quota in
// the write that stores it, once: a retried write of the same outcome
// counts nothing again, and an outcome whose file does not fit stores
// nothing, counts nothing, and says which file and how much was counted.
func TestPutOutcomeCountsItsFiles(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s, cid := readyCall(t, c)
		ctx := t.Context()
		used := func() int64 {
			n, _ := s.Usage().Used(ctx, cid)
			return n
		}
		first := record.CallOutcome{CallID: "call", Tool: "x", Result: record.ToolResult{Status: record.ResultSucceeded},
			Reserve: []artifact.Reservation{{ID: "f1", Bytes: 60, Limit: 100}, {ID: "f2", Bytes: 30, Limit: 100}}}
		for try := range 2 {
			put, err := s.PutOutcome(ctx, cid, "t00", first)
			if err != nil || put.OverQuota != nil || put.Stored != (try == 0) {
				t.Fatalf("PutOutcome() try %d = %+v, %v", try, put, err)
			}
			if n := used(); n != 90 {
				t.Errorf("after try %d the quota counts %d bytes, want 90", try, n)
			}
		}
		over := record.CallOutcome{CallID: "other", Tool: "x", Result: record.ToolResult{Status: record.ResultSucceeded},
			Reserve: []artifact.Reservation{{ID: "f3", Bytes: 5, Limit: 100}, {ID: "f4", Bytes: 10, Limit: 100}}}
		put, err := s.PutOutcome(ctx, cid, "t00", over)
		if err != nil || put.Stored {
			t.Fatalf("PutOutcome() over the quota = %+v, %v", put, err)
		}
		if r := put.OverQuota; r == nil || r.Reservation.ID != "f4" || r.Used != 95 {
			t.Errorf("OverQuota = %+v, want f4 refused with 95 bytes counted before it", r)
		}
		if n := used(); n != 90 {
			t.Errorf("the refused outcome left %d bytes counted, want 90", n)
		}
		if outs, err := s.Outcomes(ctx, cid, "t00"); err != nil || len(outs["t00"]) != 1 {
			t.Errorf("outcomes = %v, %v; want only the first", outs, err)
		}
	})
}
