package bedrock_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/clientagent/clientagent/pkg/llm/bedrock"
)

// FuzzConverseDecoding maps arbitrary Converse outputs (their content
// blocks as the SDK decodes them from a fuzzed body; issue 20): a response,
// never a panic, and when the body holds tool uses none is lost: each
// comes out with its id and name, its input as the arguments when it is a
// JSON object, else with an ArgumentsError.
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
					Content []struct {
						ToolUse *struct {
							ID    string          `json:"toolUseId"`
							Name  string          `json:"name"`
							Input json.RawMessage `json:"input"`
						} `json:"toolUse"`
					} `json:"content"`
				} `json:"message"`
			} `json:"output"`
		}
		if json.Unmarshal(b, &wire) != nil {
			return
		}
		// The blocks as the SDK's deserializer makes them: tool input as a
		// lazy document of the decoded JSON value.
		var blocks []types.ContentBlock
		for _, c := range wire.Output.Message.Content {
			if c.ToolUse == nil {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: "text"})
				continue
			}
			var in any
			_ = json.Unmarshal(c.ToolUse.Input, &in)
			tu := types.ToolUseBlock{ToolUseId: aws.String(c.ToolUse.ID), Name: aws.String(c.ToolUse.Name)}
			if len(c.ToolUse.Input) > 0 {
				tu.Input = document.NewLazyDocument(in)
			}
			blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: tu})
		}
		resp, err := bedrock.MapOutput(&bedrockruntime.ConverseOutput{Output: &types.ConverseOutputMemberMessage{Value: types.Message{Content: blocks}}})
		if err != nil {
			t.Fatalf("MapOutput() = %v", err)
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
				// Surfaced to the model as an error result, not lost (the
				// smithy encoder refuses e.g. an object key "").
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
