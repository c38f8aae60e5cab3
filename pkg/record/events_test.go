package record

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// An event read from the log keeps its JSON as stored and decodes its
// fields only when a reader asks (Fields); written again, it is the same
// bytes.
func TestEventFromTheLogKeepsItsFields(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 18, 0, 0, 123e6, time.UTC)
	e := Event{Type: EventLLMDelta, TurnID: "t1", At: at, Data: map[string]any{"text": "hé", "offset": 3, "llm_call": 1}}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	read := Event{ID: "1-0", Type: e.Type, TurnID: e.TurnID, At: at, Raw: raw}
	want := map[string]any{"text": "hé", "offset": float64(3), "llm_call": float64(1)}
	if diff := cmp.Diff(want, read.Fields()); diff != "" {
		t.Errorf("Fields() (-want +got):\n%s", diff)
	}
	again, err := json.Marshal(read)
	if err != nil || string(again) != string(raw) {
		t.Errorf("written again = %s, %v; want the stored %s", again, err, raw)
	}
	if got := e.Fields(); got["offset"] != 3 {
		t.Errorf("Fields() of an event with Data = %v, want its Data", got)
	}
}
