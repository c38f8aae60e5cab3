package sfnlocal

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var epoch0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// testEngine returns an engine on a fake clock, closed at test end.
func testEngine(t *testing.T, opts Options) (*Engine, *FakeClock) {
	t.Helper()
	clock := NewFakeClock(epoch0)
	if opts.Clock == nil {
		opts.Clock = clock
	}
	e := New(opts)
	t.Cleanup(e.Close)
	return e, clock
}

func readDef(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

func mustCreate(t *testing.T, e *Engine, name string, def []byte) string {
	t.Helper()
	arn, err := e.CreateStateMachine(name, def)
	if err != nil {
		t.Fatalf("CreateStateMachine(%s) = %v", name, err)
	}
	return arn
}

func mustStart(t *testing.T, e *Engine, sm, name, input string) string {
	t.Helper()
	arn, _, err := e.StartExecution(t.Context(), sm, name, json.RawMessage(input))
	if err != nil {
		t.Fatalf("StartExecution(%s) = %v", name, err)
	}
	return arn
}

func mustWait(t *testing.T, e *Engine, arn string) Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	x, err := e.Wait(ctx, arn)
	if err != nil {
		t.Fatalf("Wait(%s) = %v", arn, err)
	}
	return x
}

// eventually polls cond in real time; the engine runs in goroutines.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func eventTypes(t *testing.T, e *Engine, arn string) []string {
	t.Helper()
	h, err := e.History(t.Context(), arn)
	if err != nil {
		t.Fatalf("History() = %v", err)
	}
	out := make([]string, len(h))
	for i, ev := range h {
		out[i] = ev.Type
	}
	return out
}

func jsonOf(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

func echo(_ context.Context, p json.RawMessage) (json.RawMessage, error) { return p, nil }
