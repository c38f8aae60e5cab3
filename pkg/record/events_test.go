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

// An event is written byte for byte as encoding/json writes the flat
// object of its fields, type, turn_id and at (keys in order, HTML
// escaped), whatever the fields hold; a field named like the three is
// theirs.
func TestEventJSONIsTheFlatObject(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 0, 0, 123456789, time.FixedZone("x", 3600))
	strs := []string{"", "plain", "hé", "a\"b\\c", "<b>&amp;</b>", "tab\tnew\nline", "\x00\x1f\x7f", "\u2028\u2029", "🦆", string([]byte{0xff, 'a'})}
	values := []any{nil, true, false, 0, -7, int64(1) << 60, 3.5, 1e21, float32(0.1), "x<y", []any{1, "a", nil},
		map[string]any{"z": 1, "a": map[string]any{"<": ">"}}, []string{"p", "q"}, json.RawMessage(`{"k": [1, 2]}`), time.Unix(0, 0).UTC()}
	var events []Event
	for i, s := range strs {
		data := map[string]any{"text": s, s + "key": values[i%len(values)], "n": i}
		events = append(events, Event{Type: s, TurnID: "t_" + s, At: at, Data: data})
	}
	for i, v := range values {
		events = append(events, Event{Type: EventStepEnded, TurnID: "t1", At: at, Data: map[string]any{"v": v, "type": "shadowed", "at": i, "turn_id": nil}})
	}
	events = append(events, Event{Type: EventTurnEnded, TurnID: "t2"}, Event{})
	for _, e := range events {
		m := map[string]any{}
		for k, v := range e.Data {
			m[k] = v
		}
		m["type"], m["turn_id"], m["at"] = e.Type, e.TurnID, e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(e)
		if err != nil || string(got) != string(want) {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", e, got, err, want)
		}
		if direct, err := e.AppendJSON([]byte("prefix")); err != nil || string(direct) != "prefix"+string(want) {
			t.Errorf("AppendJSON = %s, %v; want prefix%s", direct, err, want)
		}
	}
	if _, err := (Event{Type: "x", Data: map[string]any{"c": make(chan int)}}).AppendJSON(nil); err == nil {
		t.Error("AppendJSON of a field JSON cannot hold: no error")
	}
}

func BenchmarkEventJSON(b *testing.B) {
	e := Event{Type: EventStepEnded, TurnID: "t_2e59d38933122a61d3", At: time.Now(), Data: map[string]any{
		"tool": "create_svg_artifact", "call_id": "call_t_2e59d38933122a61d3_1", "status": "succeeded", "duration_ms": int64(3), "llm_call": 1}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(e); err != nil {
			b.Fatal(err)
		}
	}
}
