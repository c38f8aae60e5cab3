package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/openai"
)

// wireCall is a tool call as the Chat Completions wire format has it,
// decoded independently of the SDK, for the fuzz target's oracle.
type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// FuzzResponseDecoding feeds arbitrary response bodies to the provider's
// decoding (the SDK's, then ours; issue 20): it returns an error or a
// response, never panics, and when
// the body holds tool calls none is lost: each comes out with its id and
// name, its arguments intact ("{}" for blank ones), and an
// ArgumentsError exactly when the arguments are not a JSON object. The
// same completion streamed (issue 15), its text and arguments cut into
// pieces of a size the body picks, assembles into the same response.
func FuzzResponseDecoding(f *testing.F) {
	for _, name := range []string{"response_text.json", "response_tool_calls.json", "response_bad_arguments.json", "response_cached.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"x","arguments":""}},{"id":"call_0","type":"function","function":{"name":"x","arguments":"[1]"}}]}}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := openai.DecodeResponse(b)
		if err == nil {
			assertStreamedAlike(t, b, resp)
		}
		// The oracle reads the body with exact key names, as the SDK (and
		// every provider) does; encoding/json's struct decoding would match
		// "messAge" to "message".
		var body map[string]any
		if json.Unmarshal(b, &body) != nil {
			return
		}
		choices, _ := body["choices"].([]any)
		if len(choices) == 0 {
			return // not a completion: an error or whatever the SDK made of it
		}
		first, _ := choices[0].(map[string]any)
		message, _ := first["message"].(map[string]any)
		var want []wireCall
		if rawCalls, ok := message["tool_calls"]; ok {
			cb, _ := json.Marshal(rawCalls)
			if json.Unmarshal(cb, &want) != nil || !exactCalls(rawCalls) {
				return // shapes the oracle does not model exactly
			}
		}
		if err != nil {
			// The SDK may refuse shapes the lenient oracle accepts; it must
			// then say so, never return half a response.
			if resp != nil {
				t.Fatalf("Complete() returned a response and an error %v", err)
			}
			return
		}
		if len(resp.ToolCalls) != len(want) {
			t.Fatalf("Complete() = %d tool calls, the body has %d: %s", len(resp.ToolCalls), len(want), b)
		}
		// encoding/json (the oracle) turns each invalid byte into U+FFFD; the
		// SDK keeps the bytes. Either is the same text to the model.
		valid := func(s string) string {
			var b strings.Builder
			for _, r := range s { // ranging a string yields U+FFFD per invalid byte
				b.WriteRune(r)
			}
			return b.String()
		}
		// A body that names a key twice reads differently to the oracle (the
		// last one wins) and the SDK (the first may): only the count holds.
		dup := hasDuplicateKeys(b)
		for i, w := range want {
			got := resp.ToolCalls[i]
			if dup {
				continue
			}
			if valid(got.ID) != valid(w.ID) {
				t.Errorf("call %d id = %q, want %q", i, got.ID, w.ID)
			}
			if w.Type != "" && w.Type != "function" {
				if got.ArgumentsError == "" && !dup {
					t.Errorf("call %d of type %q has no ArgumentsError", i, w.Type)
				}
				continue
			}
			// Its own verdict first: arguments it could not read are an
			// ArgumentsError exactly when they are not a JSON object.
			var obj map[string]json.RawMessage
			isObject := json.Unmarshal([]byte(got.Arguments), &obj) == nil && obj != nil
			if isObject != (got.ArgumentsError == "") {
				t.Errorf("call %d arguments %q: ArgumentsError %q, want one exactly when not a JSON object", i, got.Arguments, got.ArgumentsError)
			}
			if got.ArgumentsError != "" {
				// Surfaced to the model as an error result, not lost (a body
				// with duplicate keys reads differently to the oracle).
				continue
			}
			args := w.Function.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			if valid(got.Name) != valid(w.Function.Name) || valid(got.Arguments) != valid(args) {
				t.Errorf("call %d = %q(%q), want %q(%q)", i, got.Name, got.Arguments, w.Function.Name, args)
			}
		}
	})
}

// assertStreamedAlike streams the completion body b as SSE chunks and
// checks that they assemble into whole, the response of the body itself.
func assertStreamedAlike(t *testing.T, b []byte, whole *llm.Response) {
	t.Helper()
	if !json.Valid(b) {
		// The SDK decodes a broken body leniently (a cut number may still
		// count); only a real completion has a stream to compare with.
		return
	}
	chunks, err := streamChunks(b, 1+len(b)%7)
	if err != nil {
		t.Fatalf("streamChunks() error = %v for a body that decodes", err)
	}
	var sse bytes.Buffer
	for _, c := range chunks {
		fmt.Fprintf(&sse, "data: %s\n\n", c)
	}
	sse.WriteString("data: [DONE]\n\n")
	streamed, err := openai.DecodeStream(sse.Bytes())
	if err != nil {
		t.Fatalf("DecodeStream() error = %v, the whole body decodes to %+v", err, whole)
	}
	if !utf8.Valid(b) {
		// JSON encoding (of the chunks) turns invalid UTF-8 into U+FFFD;
		// the SDK keeps the bytes of the whole body.
		return
	}
	if diff := cmp.Diff(whole, streamed); diff != "" {
		t.Errorf("streamed response differs from the whole one (-whole +streamed):\n%s", diff)
	}
}

// exactCalls reports whether every tool call's keys are spelled exactly
// (so wireCall's case-insensitive decoding read what the SDK reads).
func exactCalls(v any) bool {
	calls, ok := v.([]any)
	if !ok {
		return false
	}
	known := map[string]bool{"id": true, "type": true, "function": true, "name": true, "arguments": true}
	var exact func(v any) bool
	exact = func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return true
		}
		for k, e := range m {
			if !known[k] && known[strings.ToLower(k)] {
				return false
			}
			if k == "function" && !exact(e) {
				return false
			}
		}
		return true
	}
	for _, c := range calls {
		if !exact(c) {
			return false
		}
	}
	return true
}

// hasDuplicateKeys reports whether some object of the JSON document b names
// a key twice.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object, wantKey bool
		keys            map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.object {
				top.wantKey = true
			}
			stack = append(stack, &frame{object: true, wantKey: true, keys: map[string]bool{}})
			continue
		case json.Delim('['):
			if top != nil && top.object {
				top.wantKey = true
			}
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return false
			}
			continue
		}
		if top != nil && top.object {
			top.wantKey = true // a value was read; a key comes next
		}
	}
}
