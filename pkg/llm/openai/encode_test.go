package openai

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
)

// A request's body is the same bytes whether its tools are encoded with it
// or taken as kept (toolCache): encode against encodeWhole, over requests
// with and without tools, a cache key and text that JSON escapes (quotes,
// HTML characters, control characters, non-ASCII), with every tool sent
// twice so the second time comes from the cache.
func TestABodyIsTheSameWithItsToolsKept(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"word", `"quoted"`, "<b>&amp;</b>", "tab\there", "new\nline", "é ü 漢字", "\u2028", "\x01", `back\slash`, ""}
	text := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	for i := range 300 {
		req := llm.Request{System: text(), Context: text(), CacheKey: []string{"", "c_1", text()}[rng.IntN(3)]}
		req.Messages = []llm.Message{{Role: llm.RoleUser, Content: text()}}
		if rng.IntN(2) == 0 {
			req.Messages = append(req.Messages,
				llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "t0", Arguments: `{"a":"` + strings.ReplaceAll(text(), `"`, "") + `"}`}}},
				llm.Message{Role: llm.RoleTool, ToolCallID: "call_1", Content: text()})
		}
		for k := range rng.IntN(5) {
			desc := text()
			d, _ := json.Marshal(desc)
			schema := fmt.Sprintf(`{"type":"object","properties":{"p%d":{"type":"string","description":%s}},"required":["p%d"]}`, k, d, k)
			if rng.IntN(4) == 0 {
				schema = ""
			}
			req.Tools = append(req.Tools, llm.ToolDefinition{Name: fmt.Sprintf("t%d", k), Description: desc, Parameters: json.RawMessage(schema)})
		}
		r, err := buildRequest("gpt-test", req)
		if err != nil {
			t.Fatal(err)
		}
		r.PromptCacheKey = req.CacheKey
		want, err := r.encodeWhole()
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := r.encode()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("request %d: body with the tools kept differs:\n got %s\nwant %s", i, got, want)
			}
		}
	}
}

// BenchmarkRequestBody encodes the body of a model call with eight tools
// of a kilobyte or so each, as the local stack's catalog offers: encode
// (the tools kept) against encodeWhole.
func BenchmarkRequestBody(b *testing.B) {
	req := llm.Request{System: strings.Repeat("A rule of the platform. ", 60), Context: "Context of this step.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Create a PNG image with the word Popelnase"}}}
	for k := range 8 {
		props := map[string]any{}
		for p := range 5 {
			props[fmt.Sprintf("p%d", p)] = map[string]any{"type": "string", "description": strings.Repeat("What the parameter is. ", 4)}
		}
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "additionalProperties": false})
		req.Tools = append(req.Tools, llm.ToolDefinition{Name: fmt.Sprintf("tool_%d", k), Description: strings.Repeat("What the tool does, with an example. ", 12), Parameters: schema})
	}
	r, err := buildRequest("gpt-test", req)
	if err != nil {
		b.Fatal(err)
	}
	for _, enc := range []struct {
		name string
		f    func() ([]byte, error)
	}{{"kept", r.encode}, {"whole", r.encodeWhole}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
