package turn

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/guardian/rules"
	"github.com/clientagent/clientagent/pkg/record"
)

// nopEvents is an event log that keeps nothing (the benchmark measures the
// check, not Valkey).
type nopEvents struct{}

func (nopEvents) Emit(context.Context, string, ...record.Event) error { return nil }
func (nopEvents) Events(context.Context, string, string, int, time.Duration) ([]record.Event, error) {
	return nil, nil
}

// BenchmarkStreamCheck is what checking the streamed answer as model
// output adds before a batch of text is shown, with the example rule file
// (pkg/guardian/rules/testdata/rules.yaml): one op is one batch of
// deltaChunks chunks checked with the tail already shown and written.
// "first" is the answer's first batch (the first visible token waits for
// it), "later" one with a full tail of windowTail bytes.
func BenchmarkStreamCheck(b *testing.B) {
	set, err := rules.Load(filepath.Join("..", "guardian", "rules", "testdata", "rules.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	checker := guardian.New(set, "rules", guardian.Policy{})
	chunk := "Here is a word "
	for _, bc := range []struct {
		name  string
		g     *guardian.Checker
		later bool
	}{
		{"first/none", nil, false},
		{"first/rules", checker, false},
		{"later/none", nil, true},
		{"later/rules", checker, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := &Handlers{Events: nopEvents{}, Guardian: bc.g}
			ctx := b.Context()
			d := h.newDeltas(ctx, Ref{ConversationID: "c", TurnID: "t"}, 1)
			d.check = h.streamCheck(ctx)
			if bc.later {
				d.tail = []byte(strings.Repeat("x", windowTail))
			}
			tail := d.tail
			b.ReportAllocs()
			for b.Loop() {
				d.tail = tail
				for range deltaChunks - 1 {
					d.text(chunk)
				}
				d.text(chunk) // the batch is full: checked and written
			}
			if d.stopped {
				b.Fatal("the stream was stopped")
			}
		})
	}
}
