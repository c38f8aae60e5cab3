package wire

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// stepAsStruct is how a step was written before AppendJSON: a struct of
// its API fields through encoding/json, which AppendJSON must match byte
// for byte.
func stepAsStruct(s Step) ([]byte, error) {
	type wire struct {
		Tool         string          `json:"tool"`
		CallID       string          `json:"call_id,omitempty"`
		Status       string          `json:"status"`
		StartedAt    string          `json:"started_at"`
		EndedAt      string          `json:"ended_at,omitempty"`
		DurationMS   *int64          `json:"duration_ms,omitempty"`
		Tokens       int             `json:"tokens,omitempty"`
		CachedTokens int             `json:"cached_tokens,omitempty"`
		CostUSD      float64         `json:"cost_usd,omitempty"`
		CostMicros   int64           `json:"cost_micros,omitempty"`
		Parent       string          `json:"parent,omitempty"`
		Inspect      json.RawMessage `json:"inspect,omitempty"`
		Arguments    map[string]any  `json:"arguments,omitempty"`
		Result       json.RawMessage `json:"result,omitempty"`
	}
	w := wire{Tool: s.Tool, CallID: s.CallID, Status: s.Status, Parent: s.Parent, Inspect: s.Inspect, StartedAt: s.StartedAt.UTC().Format(TimeLayout),
		Tokens: s.Tokens, CachedTokens: s.CachedTokens, CostMicros: s.CostMicros, CostUSD: float64(s.CostMicros) / 1e6,
		Arguments: s.Arguments, Result: s.Result}
	if !s.EndedAt.IsZero() {
		w.EndedAt = s.EndedAt.UTC().Format(TimeLayout)
		d := s.EndedAt.Sub(s.StartedAt).Milliseconds()
		w.DurationMS = &d
	}
	return json.Marshal(w)
}

// A step is written as the API shows it, byte for byte what encoding/json
// writes of its fields (times with milliseconds in UTC, duration_ms and
// cost_usd derived, empty fields left out, HTML escaped), alone and
// within a document.
func TestStepJSONIsItsAPIForm(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 0, 0, 123456789, time.FixedZone("x", -7200))
	steps := []Step{
		{},
		{Tool: "llm", Status: "succeeded", StartedAt: at, EndedAt: at.Add(1234567 * time.Microsecond), Tokens: 120, CachedTokens: 100, CostMicros: 1},
		{Tool: "create_svg_artifact", CallID: "call_1", Status: "running", StartedAt: at, Parent: "call_0"},
		{Tool: "<x&y>", CallID: "c\"1\\", Status: "fäiled\n", StartedAt: at, EndedAt: at.Add(-time.Second), Tokens: -3},
		{Tool: "t", Status: "s", StartedAt: at, Inspect: json.RawMessage(` { "a" : [1, 2 ], "h": "<b>" } `), Arguments: map[string]any{"z": 1, "a": "<", "m": map[string]any{"k": nil}},
			Result: json.RawMessage(`"x"`)},
		{Tool: "t", Status: "s", StartedAt: at, Arguments: map[string]any{}, Inspect: json.RawMessage{}},
	}
	for _, micros := range []int64{1, 7, 999, 1e6, 123456789, -5, math.MaxInt64, 1e15, -1e18} {
		steps = append(steps, Step{Tool: "llm", Status: "succeeded", StartedAt: at, CostMicros: micros})
	}
	for _, s := range steps {
		want, err := stepAsStruct(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(s)
		if err != nil || string(got) != string(want) {
			t.Errorf("json.Marshal(%+v) =\n%s, %v; want\n%s", s, got, err, want)
		}
		doc, err := json.Marshal(map[string][]Step{"steps": {s, s}})
		if wantDoc := `{"steps":[` + string(want) + `,` + string(want) + `]}`; err != nil || string(doc) != wantDoc {
			t.Errorf("in a document: %s, %v; want %s", doc, err, wantDoc)
		}
	}
	if _, err := json.Marshal(Step{Inspect: json.RawMessage(`{`)}); err == nil {
		t.Error("a step whose inspect is not JSON: no error")
	}
}

func BenchmarkStepJSON(b *testing.B) {
	at := time.Now()
	s := Step{Tool: "create_svg_artifact", CallID: "call_t_2e59d38933122a61d3_1", Status: "succeeded", StartedAt: at, EndedAt: at.Add(3 * time.Millisecond)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal([]Step{s, s}); err != nil {
			b.Fatal(err)
		}
	}
}
