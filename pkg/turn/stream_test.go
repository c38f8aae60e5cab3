package turn

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/guardian/rules"
	"github.com/clientagent/clientagent/pkg/record"
)

// recordedEvents keeps what is emitted.
type recordedEvents struct {
	mu  sync.Mutex
	evs []record.Event
}

func (r *recordedEvents) Emit(_ context.Context, _ string, evs ...record.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, evs...)
	return nil
}

func (r *recordedEvents) Events(context.Context, string, string, int, time.Duration) ([]record.Event, error) {
	return nil, nil
}

// The streamed answer is checked batch by batch with the tail already
// shown: a word split over batches stops the stream at the batch that
// completes it, however the split falls, and a retraction clears what
// was shown.
func TestStreamWindowCheck(t *testing.T) {
	t.Parallel()
	set, err := rules.New(rules.File{Rules: []rules.Rule{{ID: "word", Contains: "forbidden", Spaced: true, Action: guardian.Block}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		batches []string
		shown   string // what was shown before the stop ("" and stopped: nothing)
		stopped bool
	}{
		{"no word", []string{"all ", "is ", "fine"}, "all is fine", false},
		{"split in three", []string{"The word is for", "bid", "den."}, "The word is forbid", true},
		{"split with spaces", []string{"f o r ", "b i d ", "d e n"}, "f o r b i d ", true},
		{"split with a zero-width space", []string{"for\u200b", "bidden"}, "for\u200b", true},
		{"split in Cyrillic", []string{"f\u043er", "bidden"}, "f\u043er", true},
		// Wider than the window: the stream shows it, the check of the
		// whole answer (applyOutputCheck) is what blocks it.
		{"spread wider than the window", []string{"f", strings.Repeat(" ", windowTail), "orbidden"}, "f" + strings.Repeat(" ", windowTail) + "orbidden", false},
		{"whole in the first batch", []string{"forbidden"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evs := &recordedEvents{}
			h := &Handlers{Events: evs, Guardian: guardian.New(set, "rules", guardian.Policy{})}
			d := h.newDeltas(t.Context(), Ref{ConversationID: "c", TurnID: "t"}, 1)
			d.check = h.streamCheck(t.Context())
			for _, b := range tc.batches {
				d.text(b)
				d.flush()
			}
			var shown strings.Builder
			for _, e := range evs.evs {
				shown.WriteString(e.Data["text"].(string))
			}
			stopped, v, err := d.stopVerdict()
			if shown.String() != tc.shown || stopped != tc.stopped || err != nil {
				t.Fatalf("shown %q, stopped %v (%v, %v); want %q, stopped %v", shown.String(), stopped, v.Action, err, tc.shown, tc.stopped)
			}
			if stopped && v.Action != guardian.Block {
				t.Errorf("stop verdict = %s, want block", v.Action)
			}
			d.retract()
			if n := len(evs.evs); tc.shown != "" && (n == 0 || evs.evs[n-1].Data["text"] != "" || evs.evs[n-1].Data["offset"] != 0) {
				t.Errorf("after retract the last event is %+v, want an empty delta at offset 0", evs.evs[n-1])
			}
		})
	}
}
