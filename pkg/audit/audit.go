// Package audit keeps a durable record of what users decided and what ran
// (docs/design.md §8): every approval and rejection with the hash of the exact
// arguments it covered, every call with its result status, and every batch
// that expired or was superseded. The conversation record in Valkey is
// expiring operational context; this is the record that stays.
//
// Each event has a deterministic name (conversation, turn, call, kind), so a
// step retried by Step Functions writes the same object again instead of a
// second one. The package must not read events back into the loop.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"
)

// Kinds of events.
const (
	KindApproved = "approved"
	KindRejected = "rejected"
	// KindEdited is the user's edit of a call's arguments on approval
	// (docs/design.md §9 "modify"): PreviousHash was shown, ArgumentsHash runs.
	KindEdited     = "edited"
	KindCall       = "call"
	KindExpired    = "expired"
	KindSuperseded = "superseded"
	// KindNotExecuted is a call left unrun because its turn failed.
	KindNotExecuted = "not_executed"
	// KindCancelled is the user's cancel of a turn (no call id), and each
	// call the cancel left unrun.
	KindCancelled = "cancelled"
	// KindLost is a call that had started when its turn was cancelled and
	// whose step stopped before it could record an outcome: whether it
	// ran is not known (turn.Handlers.SettleLost).
	KindLost = "lost"
)

// Event is one audited fact about one call.
type Event struct {
	At           time.Time `json:"at"`
	Conversation string    `json:"conversation_id"`
	Turn         string    `json:"turn_id"`
	User         string    `json:"user"`
	Kind         string    `json:"kind"`
	CallID       string    `json:"call_id"`
	Tool         string    `json:"tool"`
	// ArgumentsHash is catalog.ArgumentsHash of the arguments decided on or run.
	ArgumentsHash string `json:"arguments_hash"`
	// PreviousHash is, for an edit, the hash of the arguments before it.
	PreviousHash string `json:"previous_arguments_hash,omitempty"`
	Status       string `json:"status,omitempty"` // a call's result status
	Note         string `json:"note,omitempty"`   // the user's note on a decision
}

// Log records events durably.
type Log interface {
	// Record stores events; it returns only when all are stored.
	Record(ctx context.Context, events ...Event) error
}

var safe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Name is an event's deterministic relative name: a retried step
// overwrites its own event rather than adding one, while a decision on
// other arguments (a call re-approved after the specialist asked for more
// input) is an event of its own.
func (e Event) Name() string {
	clean := func(s string) string {
		if s == "" {
			return "_"
		}
		return safe.ReplaceAllString(s, "_")
	}
	h := e.ArgumentsHash
	if len(h) > 12 {
		h = h[:12]
	}
	return fmt.Sprintf("%s/%s/%s-%s-%s.json", clean(e.Conversation), clean(e.Turn), clean(e.CallID), clean(e.Kind), clean(h))
}

var tmpSeq atomic.Uint64

// Dir is a Log in a local directory (the local stack): one JSON file per
// event, written atomically.
type Dir struct{ Path string }

// Record writes each event to its file: one write and one rename. The
// event's directory is created only when the write finds it missing (the
// first event of a turn, or after someone removed it), not every time.
func (d Dir) Record(_ context.Context, events ...Event) error {
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("audit %s: %w", e.Name(), err)
		}
		path := filepath.Join(d.Path, filepath.FromSlash(e.Name()))
		// A temporary name of this writer's own: two steps may record
		// the same event at once (a cancel and the step that finishes it).
		tmp := fmt.Sprintf("%s.%d.%d.tmp", path, os.Getpid(), tmpSeq.Add(1))
		err = os.WriteFile(tmp, b, 0o600)
		if errors.Is(err, fs.ErrNotExist) {
			if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
				err = os.WriteFile(tmp, b, 0o600)
			}
		}
		if err != nil {
			return fmt.Errorf("audit %s: %w", e.Name(), err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("audit %s: %w", e.Name(), err)
		}
	}
	return nil
}
