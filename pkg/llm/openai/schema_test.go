package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/openai"
)

// A tool's schema goes out in one canonical form (compact, keys sorted,
// HTML characters as written) whatever spelling the catalog used, the same
// on every call of the process; a tool without one gets an empty object
// schema, and one that is not a JSON object is refused before any call.
func TestToolSchemasAreSentCanonical(t *testing.T) {
	t.Parallel()
	tools := func(params string) llm.Request {
		return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
			Tools: []llm.ToolDefinition{{Name: "t", Parameters: json.RawMessage(params)}}}
	}
	sent := func(params string) string {
		t.Helper()
		body, err := openai.EncodeRequest(tools(params))
		if err != nil {
			t.Fatalf("encode %s: %v", params, err)
		}
		var r struct {
			Tools []struct {
				Function struct {
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &r); err != nil || len(r.Tools) != 1 {
			t.Fatalf("body %s: %v", body, err)
		}
		return string(r.Tools[0].Function.Parameters)
	}
	want := `{"properties":{"w":{"description":"a <b> & c","type":"string"}},"type":"object"}`
	for _, in := range []string{
		`{"type":"object","properties":{"w":{"type":"string","description":"a <b> & c"}}}`,
		"{ \"properties\" : {\"w\": {\"description\":\"a <b> & c\", \"type\":\"string\"}},\n \"type\":\"object\" }",
		`{"type":"object","properties":{"w":{"type":"string","description":"a \u003cb\u003e & c"}}}`,
	} {
		for range 2 { // the second call is answered from the cache
			if got := sent(in); got != want {
				t.Errorf("schema %s sent as %s, want %s", in, got, want)
			}
		}
	}
	for _, in := range []string{"", "null"} {
		if got := sent(in); got != `{"properties":{},"type":"object"}` {
			t.Errorf("schema %q sent as %s, want the empty object schema", in, got)
		}
	}
	for _, in := range []string{`[1]`, `"x"`, `{"a":`} {
		if _, err := openai.EncodeRequest(tools(in)); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
			t.Errorf("schema %s: error %v, want not a JSON object", in, err)
		}
	}
}

// The body of one model call of the reference turn's last step, with the
// demo catalog's sort of tools: what every LLM step pays to encode.
func BenchmarkEncodeRequest(b *testing.B) {
	req := llm.Request{System: "You are the client agent.", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Create a PNG image with the word Popelnase"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "create_svg_artifact", Arguments: `{"word":"Popelnase"}`}}},
		llm.ToolResultMessage("call_1", `{"status":"succeeded","summary":"SVG created","artifacts":[{"artifact_id":"a1","mime_type":"image/svg+xml"}]}`),
	}}
	for i := range 12 {
		req.Tools = append(req.Tools, llm.ToolDefinition{Name: "tool_" + string(rune('a'+i)), Description: "A demo skill.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string","description":"the word"},"artifact_id":{"type":"string","description":"artifact_id of an existing conversation artifact"},"size":{"type":"integer","minimum":1,"maximum":4096}},"required":["word"],"additionalProperties":false}`)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openai.EncodeRequest(req); err != nil {
			b.Fatal(err)
		}
	}
}
