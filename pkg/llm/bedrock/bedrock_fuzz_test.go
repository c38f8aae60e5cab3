package bedrock_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm/bedrock"
)

// FuzzConverseDecoding assembles arbitrary Converse answers (the content
// blocks of a fuzzed body, streamed as ConverseStream sends them, each tool
// use's input text cut into pieces of a size the body picks; issues 15 and
// 20): a response, never a panic, the text blocks joined by newlines, and
// when the body holds tool uses none is lost: each comes out with its id
// and name, its input as the arguments when it is a JSON object, else with
// an ArgumentsError.
func FuzzConverseDecoding(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"x","input":[1]}},{"toolUse":{"toolUseId":"t","name":"y","input":null}},{"text":"hi"}]}},"stopReason":"tool_use"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var wire struct {
			Output struct {
				Message struct {
					Content []wireBlock `json:"content"`
				} `json:"message"`
			} `json:"output"`
		}
		if json.Unmarshal(b, &wire) != nil {
			return
		}
		events := streamEvents(wire.Output.Message.Content, 1+len(b)%5)
		resp, err := bedrock.ReadEvents(events)
		if err != nil {
			t.Fatalf("ReadEvents() = %v", err)
		}
		var texts []string
		for _, c := range wire.Output.Message.Content {
			if c.ToolUse == nil {
				texts = append(texts, "text")
			}
		}
		if want := strings.Join(texts, "\n"); resp.Text != want {
			t.Errorf("text = %q, want %q", resp.Text, want)
		}
		var want []int
		for i, c := range wire.Output.Message.Content {
			if c.ToolUse != nil {
				want = append(want, i)
			}
		}
		if len(resp.ToolCalls) != len(want) {
			t.Fatalf("Complete() = %d tool calls, the body has %d: %s", len(resp.ToolCalls), len(want), b)
		}
		for k, i := range want {
			w, got := wire.Output.Message.Content[i].ToolUse, resp.ToolCalls[k]
			if got.ID != w.ID || got.Name != w.Name {
				t.Errorf("call %d = %q %q, want %q %q", k, got.ID, got.Name, w.ID, w.Name)
			}
			var obj map[string]any
			isObject := json.Unmarshal(w.Input, &obj) == nil && obj != nil
			if !isObject {
				if got.ArgumentsError == "" && len(bytes.TrimSpace(w.Input)) > 0 && string(bytes.TrimSpace(w.Input)) != "null" {
					t.Errorf("call %d input %s: no ArgumentsError", k, w.Input)
				}
				continue
			}
			if got.ArgumentsError != "" {
				t.Errorf("call %d input %s: ArgumentsError %q for a JSON object", k, w.Input, got.ArgumentsError)
				continue
			}
			var args map[string]any
			if json.Unmarshal([]byte(got.Arguments), &args) != nil {
				t.Errorf("call %d input %s came out as %q (%s)", k, w.Input, got.Arguments, got.ArgumentsError)
				continue
			}
			wb, _ := json.Marshal(obj)
			gb, _ := json.Marshal(args)
			if !bytes.Equal(wb, gb) {
				t.Errorf("call %d arguments %s, want %s", k, gb, wb)
			}
		}
	})
}

// wireBlock is a content block as the Converse wire format has it, read
// only as far as a tool use.
type wireBlock struct {
	ToolUse *struct {
		ID    string          `json:"toolUseId"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"toolUse"`
}

// streamEvents is the ConverseStream a model sends for content: a text
// block as two deltas, a tool use as its start and its input text in pieces
// of n bytes, then messageStop and the metadata.
func streamEvents(content []wireBlock, n int) []bedrock.Event {
	ev := func(typ string, payload any) bedrock.Event {
		b, err := json.Marshal(payload)
		if err != nil {
			panic(err)
		}
		return bedrock.Event{Type: typ, Payload: b}
	}
	events := []bedrock.Event{ev("messageStart", map[string]any{"role": "assistant"})}
	for i, c := range content {
		tu := c.ToolUse
		if tu == nil {
			for _, p := range []string{"te", "xt"} {
				events = append(events, ev("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"text": p}}))
			}
		} else {
			events = append(events, ev("contentBlockStart", map[string]any{"contentBlockIndex": i,
				"start": map[string]any{"toolUse": map[string]any{"toolUseId": tu.ID, "name": tu.Name}}}))
			for in := string(tu.Input); in != ""; {
				k := min(n, len(in))
				events = append(events, ev("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"toolUse": map[string]any{"input": in[:k]}}}))
				in = in[k:]
			}
		}
		events = append(events, ev("contentBlockStop", map[string]any{"contentBlockIndex": i}))
	}
	return append(events,
		ev("messageStop", map[string]any{"stopReason": "end_turn"}),
		ev("metadata", map[string]any{"usage": map[string]any{"inputTokens": 1, "outputTokens": 1}}),
	)
}
