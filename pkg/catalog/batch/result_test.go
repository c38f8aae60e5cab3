package batch_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
)

// docs/design.md §3.5: inputs and input_sources appear only when something other
// than the model supplied a value; then input_sources covers every argument.
func TestCompact_InputsAndSources(t *testing.T) {
	t.Parallel()
	ok := record.ToolResult{Status: record.ResultSucceeded, Summary: "Drew it.",
		Artifacts: []artifact.Ref{{ID: "a2", Name: "f.svg", MimeType: "image/svg+xml"}}}
	tests := []struct {
		name        string
		pc          record.PendingCall
		wantInputs  string
		wantSources map[string]string
	}{
		{
			name: "all from the model: nothing extra",
			pc: record.PendingCall{Arguments: map[string]any{"holes": 6.0, "material": "steel"},
				Sources: map[string]string{"holes": "model", "material": "model"}},
		},
		{
			name: "user and context values",
			pc: record.PendingCall{Arguments: map[string]any{"holes": 6.0, "material": "steel", "conversation_id": "c1"},
				Sources: map[string]string{"holes": "model", "material": "user", "conversation_id": "context"}},
			wantInputs:  `{"conversation_id":"c1","material":"steel"}`,
			wantSources: map[string]string{"holes": "model", "material": "user", "conversation_id": "context"},
		},
		{
			name: "missing source counts as model",
			pc: record.PendingCall{Arguments: map[string]any{"holes": 6.0, "material": "brass"},
				Sources: map[string]string{"material": "user"}},
			wantInputs:  `{"material":"brass"}`,
			wantSources: map[string]string{"holes": "model", "material": "user"},
		},
	}
	for _, tt := range tests {
		got := batch.Compact(tt.pc, ok)
		if string(got.Inputs) != tt.wantInputs {
			t.Errorf("%s: Compact() inputs = %s, want %s", tt.name, got.Inputs, tt.wantInputs)
		}
		if diff := cmp.Diff(tt.wantSources, got.InputSources); diff != "" {
			t.Errorf("%s: Compact() input_sources mismatch (-want +got):\n%s", tt.name, diff)
		}
		if got.Summary != ok.Summary || len(got.Artifacts) != 1 {
			t.Errorf("%s: Compact() = %+v, want summary and artifacts kept", tt.name, got)
		}
	}
}

// docs/design.md §3.5: summary ≤ 2 000, result ≤ 6 000, inputs ≤ 2 000 characters,
// cut on rune boundaries, still valid JSON.
func TestCompact_Limits(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ä€😀", 3000) // multi-byte runes only
	pc := record.PendingCall{Arguments: map[string]any{"text": long, "n": 1.0}, Sources: map[string]string{"text": "user", "n": "model"}}
	got := batch.Compact(pc, record.ToolResult{Status: record.ResultSucceeded, Summary: long, Result: long, Error: long})
	for _, f := range []struct {
		name string
		s    string
		max  int
	}{{"summary", got.Summary, batch.MaxSummary}, {"result", got.Result, batch.MaxResult}, {"error", got.Error, batch.MaxError}} {
		if n := utf8.RuneCountInString(f.s); n != f.max {
			t.Errorf("Compact() %s has %d chars, want %d", f.name, n, f.max)
		}
		if !utf8.ValidString(f.s) || !strings.HasSuffix(f.s, "…(truncated)") {
			t.Errorf("Compact() %s is not valid UTF-8 ending in the marker", f.name)
		}
	}
	var inputs string
	if err := json.Unmarshal(got.Inputs, &inputs); err != nil {
		t.Fatalf("Compact() inputs over the limit = %.80s…, want a JSON string: %v", got.Inputs, err)
	}
	if n := utf8.RuneCountInString(inputs); n != batch.MaxInputs || !strings.HasPrefix(inputs, `{"text":"ä€😀`) {
		t.Errorf("Compact() inputs text has %d chars (%.40s), want %d chars of the inputs' JSON", n, inputs, batch.MaxInputs)
	}
	content := batch.Content(got)
	if !json.Valid([]byte(content)) {
		t.Errorf("Content() is not valid JSON")
	}
	short := batch.Compact(record.PendingCall{}, record.ToolResult{Status: "succeeded", Summary: "ok"})
	if short.Summary != "ok" {
		t.Errorf("Compact() short summary = %q, want it unchanged", short.Summary)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello world, long enough", 17, "hello…(truncated)"},
		{"äöüäöüäöüäöüäöüäöü", 14, "äö…(truncated)"},
		{"abc", 3, "abc"},
	}
	for _, tt := range tests {
		if got := batch.Truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// docs/design.md §3.5: the immediate results of calls that do not run.
func TestResultFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		pc   record.PendingCall
		want string
	}{
		{"invalid", record.PendingCall{State: record.CallInvalid, Error: `unknown tool "x"`},
			`{"status":"failed","error":"unknown tool \"x\""}`},
		{"rejected", record.PendingCall{State: record.CallRejected},
			`{"status":"rejected","summary":"The user rejected this call."}`},
		{"rejected with note", record.PendingCall{State: record.CallRejected, Note: "use print"},
			`{"status":"rejected","summary":"The user rejected this call. Note: use print"}`},
		{"not executed", record.PendingCall{State: record.CallNotExecuted},
			`{"status":"not_executed","summary":"This call was not executed. The user moved on before it could run; call it again only if it is still wanted."}`},
		{"not executed with note", record.PendingCall{State: record.CallNotExecuted, Note: "The user sent a new message instead: <stop>"},
			`{"status":"not_executed","summary":"This call was not executed. Note: The user sent a new message instead: <stop>"}`},
		{"answered", record.PendingCall{State: record.CallAnswered, Note: "Files uploaded with this reply: a.png (artifact_id=u1, image/png)",
			Arguments: map[string]any{"questions": []any{}, "answers": map[string]any{"count": 3.0}}},
			`{"status":"answered","summary":"Files uploaded with this reply: a.png (artifact_id=u1, image/png)","result":"{\"count\":3}"}`},
		{"ready has no immediate result", record.PendingCall{State: record.CallReady},
			`{"status":"failed","error":"the call produced no result (state ready)"}`},
	}
	for _, tt := range tests {
		if got := batch.Content(batch.ResultFor(tt.pc)); got != tt.want {
			t.Errorf("%s: Content(ResultFor()) = %s, want %s", tt.name, got, tt.want)
		}
	}
	// The loop compacts every result; an answered ask_user must not repeat
	// its answers as inputs.
	answered := record.PendingCall{Kind: record.KindAskUser, State: record.CallAnswered,
		Arguments: map[string]any{"questions": []any{}, "answers": map[string]any{"count": 3.0}},
		Sources:   map[string]string{"questions": "model", "answers": "user"}}
	want := `{"status":"answered","result":"{\"count\":3}"}`
	if got := batch.Content(batch.Compact(answered, batch.ResultFor(answered))); got != want {
		t.Errorf("Content(Compact(ResultFor(answered))) = %s, want %s", got, want)
	}
}
