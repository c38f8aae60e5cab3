package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

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
// decoding (issue 20): it returns an error or a response, never panics; a
// JSON body decodes as the official SDK (openai-go, the oracle) decodes
// it; and when the body holds tool calls none is lost: each comes out with
// its id and name, its arguments intact ("{}" for blank ones), and an
// ArgumentsError exactly when the arguments are not a JSON object. The
// same completion streamed (issue 15), its text and arguments cut into
// pieces of a size the body picks, assembles into the same response.
//
// Bodies that read two ways are not compared with the SDK: a key named
// twice (encoding/json keeps the last, the SDK may keep the first; the
// count of tool calls still holds), or a wire key spelled in another case
// ("messAge"), which encoding/json matches and the SDK does not. No server
// sends either.
func FuzzResponseDecoding(f *testing.F) {
	for _, name := range []string{"response_text.json", "response_tool_calls.json", "response_bad_arguments.json", "response_cached.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"x","arguments":""}},{"id":"call_0","type":"function","function":{"name":"x","arguments":"[1]"}}]}}]}`))
	// Arguments as an object, not a string holding one (some servers): kept as its JSON.
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"x","arguments":{"a":1}}}]}}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := openai.DecodeResponse(b)
		if err == nil && resp == nil {
			t.Fatalf("DecodeResponse() = nil, nil")
		}
		if err != nil && resp != nil {
			t.Fatalf("DecodeResponse() returned a response and an error %v", err)
		}
		dup, folded := hasDuplicateKeys(b), hasFoldedKeys(b)
		if json.Valid(b) && !dup && !folded {
			assertDecodesAsTheSDK(t, b, resp, err)
			if err == nil {
				assertStreamedAlike(t, b, resp)
			}
		}
		// The second oracle reads the body with exact key names, as the SDK
		// (and every provider) does; the provider's encoding/json decoding
		// matches "messAge" to "message" (above).
		var body map[string]any
		if folded || json.Unmarshal(b, &body) != nil {
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
			// The decoding may refuse shapes the lenient oracle accepts; it
			// then says so, never returns half a response (above).
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
		// A key named twice (above): only the count holds.
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

// assertDecodesAsTheSDK checks our decoding of the JSON body b (resp, err)
// against the SDK's: both fail, or both give the same response (text
// compared as valid UTF-8: encoding/json turns each invalid byte into
// U+FFFD).
func assertDecodesAsTheSDK(t *testing.T, b []byte, resp *llm.Response, err error) {
	t.Helper()
	want, wantErr := sdkDecode(b)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("DecodeResponse() error = %v, the SDK's = %v: %s", err, wantErr, b)
	}
	if err != nil {
		return
	}
	if diff := cmp.Diff(validText(want), validText(resp)); diff != "" {
		t.Errorf("DecodeResponse() differs from the SDK's decoding (-sdk +ours):\n%s\nbody: %s", diff, b)
	}
}

// sdkDecode is the oracle: the body decoded by openai-go and mapped as the
// provider maps a completion.
func sdkDecode(b []byte) (*llm.Response, error) {
	var res oai.ChatCompletion
	if err := res.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	if len(res.Choices) == 0 {
		return nil, errors.New("no choices")
	}
	msg := res.Choices[0].Message
	out := &llm.Response{Text: msg.Content, Model: res.Model, Usage: llm.Usage{
		InputTokens:       int(res.Usage.PromptTokens),
		OutputTokens:      int(res.Usage.CompletionTokens),
		CachedInputTokens: int(res.Usage.PromptTokensDetails.CachedTokens),
		CacheWriteTokens:  int(res.Usage.PromptTokensDetails.CacheWriteTokens),
	}}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Custom.Name, Arguments: tc.Custom.Input,
				ArgumentsError: fmt.Sprintf("unsupported tool call type %q", tc.Type)})
			continue
		}
		c := llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		if strings.TrimSpace(c.Arguments) == "" {
			c.Arguments = "{}"
		}
		c.ArgumentsError = openai.ArgumentsError(c.Arguments)
		out.ToolCalls = append(out.ToolCalls, c)
	}
	return out, nil
}

// validText is r with its strings as valid UTF-8 (U+FFFD for each invalid
// byte, as encoding/json decodes them) and each ArgumentsError only said
// to be there (its wording quotes what may be invalid UTF-8), for
// comparing decodings.
func validText(r *llm.Response) *llm.Response {
	valid := func(s string) string {
		var b strings.Builder
		for _, r := range s { // ranging a string yields U+FFFD per invalid byte
			b.WriteRune(r)
		}
		return b.String()
	}
	out := *r
	out.Text, out.Model = valid(r.Text), valid(r.Model)
	out.ToolCalls = nil
	for _, c := range r.ToolCalls {
		c.ID, c.Name, c.Arguments = valid(c.ID), valid(c.Name), valid(c.Arguments)
		if c.ArgumentsError != "" {
			c.ArgumentsError = "set"
		}
		out.ToolCalls = append(out.ToolCalls, c)
	}
	return &out
}

// wireKeys are the keys the provider reads from an answer.
var wireKeys = []string{"model", "choices", "usage", "message", "content", "tool_calls", "id", "type", "function",
	"name", "arguments", "custom", "input", "prompt_tokens", "completion_tokens", "prompt_tokens_details",
	"cached_tokens", "cache_write_tokens", "index", "delta", "finish_reason", "error"}

// hasFoldedKeys reports whether the JSON document b names a wire key in
// another case, which encoding/json reads as the key and the SDK does not.
func hasFoldedKeys(b []byte) bool {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return false
	}
	var folded func(v any) bool
	folded = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				for _, w := range wireKeys {
					if k != w && strings.EqualFold(k, w) {
						return true
					}
				}
				if folded(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if folded(e) {
					return true
				}
			}
		}
		return false
	}
	return folded(v)
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

// BenchmarkDecodeStream reads a streamed tool-call answer (the chunks of
// testdata/response_tool_calls.json, text and arguments in pieces of 4
// bytes): ours assembles and maps it; sdk only decodes its chunks with
// openai-go's stream, the part of Complete the SDK did before.
func BenchmarkDecodeStream(b *testing.B) {
	body, err := os.ReadFile("testdata/response_tool_calls.json")
	if err != nil {
		b.Fatal(err)
	}
	chunks, err := streamChunks(body, 4)
	if err != nil {
		b.Fatal(err)
	}
	var sse bytes.Buffer
	for _, c := range chunks {
		fmt.Fprintf(&sse, "data: %s\n\n", c)
	}
	sse.WriteString("data: [DONE]\n\n")
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := openai.DecodeStream(sse.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(sse.Bytes()))}
			stream := ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
			for stream.Next() {
				_ = stream.Current()
			}
			if err := stream.Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
