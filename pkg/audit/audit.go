// Package audit keeps a durable record of what users decided and what ran
// (docs/design.md §8): every approval and rejection with the hash of the exact
// arguments it covered, every call with its result status, and every batch
// that expired or was superseded. The conversation record in Valkey is
// expiring operational context; this is the record that stays.
//
// Each event has a deterministic name (conversation, turn, call, kind), so a
// step retried by Step Functions writes the same object again instead of a
// second one (in a Dir, a line of the same name, which readers take as
// one). The package must not read events back into the loop.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/clientagent/clientagent/pkg/rawfile"
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

// Dir is a Log in a local directory (the local stack): one JSON Lines
// file per day (UTC, by the event's time), <Path>/<YYYY-MM-DD>.jsonl,
// each line an event with its Name. A file per event cost a file creation
// per call, about a millisecond on an ext4 disk; an append costs a write.
//
// Each Record is one append (O_APPEND, a single write of whole lines), so
// lines of concurrent writers never interleave, and what Record returned
// for is in the file even if the process is killed the next moment. A
// retried step appends its event again under the same name: a reader
// keeps the last line of each name (ReadDir).
type Dir struct{ Path string }

// line is an event as Dir stores it.
type line struct {
	Name string `json:"name"`
	Event
}

// Record appends the events to their days' files. A missing directory is
// created when the append finds it missing, not every time.
func (d Dir) Record(_ context.Context, events ...Event) error {
	byDay := map[string][]byte{}
	var days []string
	for _, e := range events {
		b, err := json.Marshal(line{Name: e.Name(), Event: e})
		if err != nil {
			return fmt.Errorf("audit %s: %w", e.Name(), err)
		}
		day := e.day()
		if _, ok := byDay[day]; !ok {
			days = append(days, day)
		}
		byDay[day] = append(append(byDay[day], b...), '\n')
	}
	for _, day := range days {
		if err := d.append(filepath.Join(d.Path, day+".jsonl"), byDay[day]); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	return nil
}

func (d Dir) append(path string, b []byte) error {
	err := rawfile.Append(path, b, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(d.Path, 0o700); err == nil {
			err = rawfile.Append(path, b, 0o600)
		}
	}
	return err
}

// day is the UTC date of the event's time (of now, without one).
func (e Event) day() string {
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	return at.UTC().Format(time.DateOnly)
}

// decodeLine decodes one line. A write cut short leaves a line without
// its end, and the next append continues that line: the event after it
// is still read, from its own start.
func decodeLine(raw []byte) (line, bool) {
	var l line
	if err := json.Unmarshal(raw, &l); err == nil && l.Name != "" {
		return l, true
	}
	if i := bytes.LastIndex(raw, []byte(`{"name":`)); i > 0 {
		return decodeLine(raw[i:])
	}
	return line{}, false
}

// ReadDir reads a Dir's events, for operators and tests (never the loop):
// each name once, as its last line has it, in the order names first
// appear, day by day. What a write cut short left (a disk that filled up)
// is skipped: Record did not return for it, so its step writes it again.
// Any other line that is not an event is an error.
func ReadDir(path string) ([]Event, error) {
	files, err := filepath.Glob(filepath.Join(path, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	index := map[string]int{}
	var out []Event
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		lines := bytes.Split(b, []byte("\n"))
		for i, raw := range lines {
			if len(bytes.TrimSpace(raw)) == 0 {
				continue
			}
			l, ok := decodeLine(raw)
			if !ok {
				if i == len(lines)-1 {
					continue // cut short: no newline after it
				}
				return nil, fmt.Errorf("%s line %d: not an audit event", file, i+1)
			}
			if j, ok := index[l.Name]; ok {
				out[j] = l.Event
				continue
			}
			index[l.Name] = len(out)
			out = append(out, l.Event)
		}
	}
	return out, nil
}
