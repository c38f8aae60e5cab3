package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// A plain message is one round trip (docs/architecture.md): a new turn's
// first write checks what the request would have read, and writes only
// to a conversation that exists in the current layout, is the user's and
// has no turn running or waiting; otherwise it writes nothing and says to
// read first (and the read migrates an old conversation). What
// it writes is what SaveTurnAhead writes, and the first LLM step takes
// its read ahead without a round trip. A Store that keeps no reads
// checks the same and only saves.
func TestAFirstWriteChecksWhatTheRequestWouldRead(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		rt := &valkeytest.RoundTrips{}
		c.AddHook(rt)
		s := valkey.New(c, valkey.Options{ReadBack: true})
		owner := valkeytest.ID(t, "u")
		cid := create(t, s, owner)
		ctx := t.Context()
		llmQuery := func(id string) record.Query { return record.Query{TurnID: id, Window: 80} }

		// Refused: nothing is written, whatever the reason.
		for _, tc := range []struct{ name, cid, owner string }{
			{"a conversation that does not exist", valkeytest.ID(t, "c-none"), owner},
			{"someone else's conversation", cid, owner + "-other"},
		} {
			tr := progress(1, 0)
			if _, err := s.SaveFirstTurn(ctx, tc.cid, tc.owner, tr, llmQuery(tr.ID)); !errors.Is(err, record.ErrReadFirst) {
				t.Errorf("%s: SaveFirstTurn() = %v, want ErrReadFirst", tc.name, err)
			}
		}
		if conv, _, err := s.LoadStep(ctx, cid, record.Query{}); err != nil || len(conv.Turns) != 0 {
			t.Fatalf("after the refused writes: %v, %v; want no turn", conv, err)
		}
		// A conversation stored before this layout (its meta alone, with
		// old turns): refused, so that the request's read migrates it.
		oldCID := valkeytest.ID(t, "c-old")
		t.Cleanup(func() { _ = s.Delete(context.Background(), oldCID) })
		old := finished(0)
		ob, _ := jsonMarshal(old)
		if err := c.HSet(ctx, "conv:{"+oldCID+"}", "meta", fmt.Sprintf(`{"conversation_id":%q,"owner":%q,"created_at":"2026-09-30T12:00:00Z"}`, oldCID, owner),
			"turn:"+old.ID, ob).Err(); err != nil {
			t.Fatal(err)
		}
		tr := progress(1, 0)
		if _, err := s.SaveFirstTurn(ctx, oldCID, owner, tr, llmQuery(tr.ID)); !errors.Is(err, record.ErrReadFirst) {
			t.Errorf("a conversation of the old layout: SaveFirstTurn() = %v, want ErrReadFirst", err)
		}
		if migrated, _, err := s.LoadStep(ctx, oldCID, record.Query{TurnID: old.ID, Window: 80}); err != nil || len(migrated.Turns) != 1 {
			t.Errorf("the old conversation read after the refused write: %v, %v; want its one turn", migrated, err)
		}

		// Written: one round trip, and the first step's read rides on it.
		first := progress(1, 0)
		n := rt.N.Load()
		token, err := s.SaveFirstTurn(ctx, cid, owner, first, llmQuery(first.ID))
		if err != nil || token == "" {
			t.Fatalf("SaveFirstTurn() = %q, %v; want a token", token, err)
		}
		if got := rt.N.Load() - n; got != 1 {
			t.Errorf("SaveFirstTurn took %d round trips, want 1", got)
		}
		q := llmQuery(first.ID)
		q.After = []string{token}
		n = rt.N.Load()
		conv, _, err := s.LoadStep(ctx, cid, q)
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.N.Load() - n; got != 0 {
			t.Errorf("the first step's read took %d round trips, want none (the write's read ahead)", got)
		}
		if got, ok := conv.Turn(first.ID); !ok || got.Status != record.StatusRunning || got.Text != first.Text {
			t.Fatalf("the first step read the turn %+v (found %v), want it running with its text", got, ok)
		}

		// A turn is active now: the next first write is refused, and
		// writes nothing; the request reads and decides.
		second := progress(2, 0)
		if _, err := s.SaveFirstTurn(ctx, cid, owner, second, llmQuery(second.ID)); !errors.Is(err, record.ErrReadFirst) {
			t.Errorf("with a turn running: SaveFirstTurn() = %v, want ErrReadFirst", err)
		}
		if conv, _, err := s.LoadStep(ctx, cid, record.Query{}); err != nil || len(conv.Turns) != 1 {
			t.Fatalf("after the refused write: %d turns, %v; want 1", len(conv.Turns), err)
		}

		// The turn ended: the conversation is idle again, and a Store that
		// keeps no reads writes the next turn as well, without a token.
		first.Status = record.StatusSucceeded
		if err := s.SaveTurn(ctx, cid, first); err != nil {
			t.Fatal(err)
		}
		plain := valkey.New(c, valkey.Options{})
		if token, err := plain.SaveFirstTurn(ctx, cid, owner, second, llmQuery(second.ID)); err != nil || token != "" {
			t.Fatalf("a Store without reads: SaveFirstTurn() = %q, %v; want no token, no error", token, err)
		}
		conv, _, err = s.LoadStep(ctx, cid, record.Query{TurnID: second.ID, Window: 80})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := conv.Turn(second.ID); !ok || got.Status != record.StatusRunning || len(conv.Turns) != 2 {
			t.Fatalf("after the second first write: the turn %+v (found %v) of %d, want it running, of 2", got, ok, len(conv.Turns))
		}
	})
}
