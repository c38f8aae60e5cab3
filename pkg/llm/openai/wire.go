package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clientagent/clientagent/pkg/llm"
)

// The Chat Completions wire format, the part of it this package sends and
// reads. Requests are encoded from these structs (byte-stable: fields in
// declaration order, schemas as maps with sorted keys); answers are decoded
// leniently, as the official SDK does: a field of an unexpected type is left
// at its zero value instead of failing the answer (unmarshalLenient).

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Stream   bool          `json:"stream"`
	// StreamOptions asks for the usage in a last chunk.
	StreamOptions  streamOptions `json:"stream_options"`
	Tools          []chatTool    `json:"tools,omitempty"`
	ToolChoice     string        `json:"tool_choice,omitempty"`
	PromptCacheKey string        `json:"prompt_cache_key,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is nil only for an assistant message of tool calls alone.
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// encode is the request body. HTML characters are not escaped: the body
// is for a model, not a page. It is the bytes encodeWhole writes; the
// tools, most of a body and the same on every call of a conversation, go
// in as each one's kept encoding (toolCache), and the rest is encoded
// around them.
func (r *chatRequest) encode() ([]byte, error) {
	if len(r.Tools) == 0 {
		return r.encodeWhole()
	}
	head := *r
	head.Tools, head.ToolChoice, head.PromptCacheKey = nil, "", ""
	hb, err := head.encodeWhole() // {…,"stream_options":{…}}\n: the fields before tools
	if err != nil {
		return nil, err
	}
	encoded := make([][]byte, len(r.Tools))
	size := len(hb) + len(r.ToolChoice) + len(r.PromptCacheKey) + 64
	for i, t := range r.Tools {
		if encoded[i], err = tools.encoding(t); err != nil {
			return nil, err
		}
		size += len(encoded[i]) + 1
	}
	b := append(make([]byte, 0, size), bytes.TrimSuffix(hb, []byte("}\n"))...)
	b = append(b, `,"tools":[`...)
	for i, tb := range encoded {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, tb...)
	}
	b = append(b, ']')
	for _, f := range []struct{ name, v string }{{"tool_choice", r.ToolChoice}, {"prompt_cache_key", r.PromptCacheKey}} {
		if f.v == "" {
			continue // omitempty
		}
		vb, err := encodeValue(f.v)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"`+f.name+`":`...), vb...)
	}
	return append(b, "}\n"...), nil
}

// encodeWhole is the request body encoded whole, as encoding/json writes
// r: encode's output, byte for byte.
func (r *chatRequest) encodeWhole() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// encodeValue is v as encode writes it: compact, HTML characters as they
// are.
func encodeValue(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// toolCache keeps each tool's encoding, as schemaCache keeps schemas:
// every call of every turn sends the same few tools, whose descriptions
// and schemas encoding/json would escape and compact again each time. A
// tool is known by its name, description and schema, the schema by where
// its bytes are: the canonical schemas buildRequest takes from schemaCache
// are the same bytes from call to call, and a key holds its schema's
// bytes, so no other schema is ever at that address. Past maxSchemas
// distinct tools, a tool is encoded for its call and not kept.
type toolCache struct {
	m sync.Map // toolKey → []byte
	n atomic.Int64
}

type toolKey struct {
	typ, name, description string
	schema                 *byte
	size                   int
}

var tools toolCache

func (c *toolCache) encoding(t chatTool) ([]byte, error) {
	key := toolKey{typ: t.Type, name: t.Function.Name, description: t.Function.Description, size: len(t.Function.Parameters)}
	if len(t.Function.Parameters) > 0 {
		key.schema = &t.Function.Parameters[0]
	}
	if v, ok := c.m.Load(key); ok {
		return v.([]byte), nil
	}
	b, err := encodeValue(t)
	if err != nil {
		return nil, err
	}
	if c.n.Load() < maxSchemas {
		if _, loaded := c.m.LoadOrStore(key, b); !loaded {
			c.n.Add(1)
		}
	}
	return b, nil
}

// buildRequest maps req to a Chat Completions request: the system rules
// first, then the transcript, then the per-call Context as a last system
// message, so everything before the Context is the same prefix on the
// conversation's next call (issue 18); tools as function tools in the given
// order with tool_choice=auto (only when there are tools: some servers
// reject tool_choice without them). The body is byte-stable for the same
// request: schemas are maps, which encode with sorted keys.
func buildRequest(model string, req llm.Request) (*chatRequest, error) {
	r := &chatRequest{
		Model: model,
		// The call is streamed; usage comes in a last chunk only when asked.
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		Messages:      make([]chatMessage, 0, len(req.Messages)+2),
	}
	if req.System != "" {
		r.Messages = append(r.Messages, textMessage("system", req.System))
	}
	for i, m := range req.Messages {
		msg, err := mapMessage(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		r.Messages = append(r.Messages, msg)
	}
	if req.Context != "" {
		r.Messages = append(r.Messages, textMessage("system", req.Context))
	}
	for _, t := range req.Tools {
		schema, err := schemas.canonical(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
		}
		r.Tools = append(r.Tools, chatTool{Type: "function", Function: toolFunction{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	if len(r.Tools) > 0 {
		r.ToolChoice = "auto"
	}
	return r, nil
}

// emptySchema is the parameters of a tool that declares none.
var emptySchema = json.RawMessage(`{"properties":{},"type":"object"}`)

// schemaCache holds tools' parameter schemas in their canonical encoding:
// compact, keys sorted, HTML characters as they are. Every step of every
// turn sends the same few schemas, so each is decoded and encoded once per
// process rather than once per model call. It is bounded: past maxSchemas
// distinct schemas, a schema is encoded for its call and not kept.
type schemaCache struct {
	m sync.Map // string(raw) → json.RawMessage
	n atomic.Int64
}

const maxSchemas = 4096

var schemas schemaCache

func (c *schemaCache) canonical(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return emptySchema, nil
	}
	if v, ok := c.m.Load(string(raw)); ok {
		return v.(json.RawMessage), nil
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return nil, err
	}
	if schema == nil { // a JSON null with spaces around it
		return emptySchema, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(schema); err != nil {
		return nil, err
	}
	out := json.RawMessage(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	if c.n.Load() < maxSchemas {
		if _, loaded := c.m.LoadOrStore(string(raw), out); !loaded {
			c.n.Add(1)
		}
	}
	return out, nil
}

func textMessage(role, content string) chatMessage {
	return chatMessage{Role: role, Content: &content}
}

func mapMessage(m llm.Message) (chatMessage, error) {
	switch m.Role {
	case llm.RoleSystem:
		return textMessage("system", m.Content), nil
	case llm.RoleUser:
		return textMessage("user", m.Content), nil
	case llm.RoleTool:
		if m.ToolCallID == "" {
			return chatMessage{}, errors.New("tool message without tool_call_id")
		}
		msg := textMessage("tool", m.Content)
		msg.ToolCallID = m.ToolCallID
		return msg, nil
	case llm.RoleAssistant:
		msg := chatMessage{Role: "assistant"}
		// Content is omitted when empty and there are calls: the wire format
		// allows it and some servers reject an empty string next to tool_calls.
		if m.Content != "" || len(m.ToolCalls) == 0 {
			msg.Content = &m.Content
		}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: c.ID, Type: "function", Function: chatFunction{Name: c.Name, Arguments: c.Arguments}})
		}
		return msg, nil
	default:
		return chatMessage{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

// completion is a whole (non-streamed) answer, or one assembled from a
// stream. Only choice 0 counts (n is never set).
type completion struct {
	Model   wireString `json:"model"`
	Choices []choice   `json:"choices"`
	Usage   usage      `json:"usage"`
}

type choice struct {
	Message struct {
		Content   wireString     `json:"content"`
		ToolCalls []wireToolCall `json:"tool_calls"`
	} `json:"message"`
	// notObject is set for an element of choices that is neither an
	// object nor null: the official SDK then reads no choices at all, and
	// so does this package.
	notObject bool
}

func (c *choice) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' && string(b) != "null" {
		c.notObject = true
		return nil
	}
	type fields choice // the same fields, not this method
	return unmarshalLenient(b, (*fields)(c))
}

// wireToolCall is a tool call of an answer: a function call, or a call of
// another type (custom tools, never offered), whose name and input are in
// "custom".
type wireToolCall struct {
	ID       wireString   `json:"id"`
	Type     wireString   `json:"type"`
	Function wireFunction `json:"function"`
	Custom   struct {
		Name  wireString `json:"name"`
		Input wireString `json:"input"`
	} `json:"custom"`
}

// usage counts tokens; OpenAI's prompt_tokens already counts the cached ones.
type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
}

// chunk is one event of a streamed answer.
type chunk struct {
	Model   wireString `json:"model"`
	Choices []struct {
		Index int64 `json:"index"`
		Delta struct {
			Content   wireString `json:"content"`
			ToolCalls []struct {
				Index    int64        `json:"index"`
				ID       wireString   `json:"id"`
				Type     wireString   `json:"type"`
				Function wireFunction `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason wireString `json:"finish_reason"`
	} `json:"choices"`
	// Usage is sent in the last chunk (stream_options.include_usage).
	Usage *usage `json:"usage"`
	// Error is an error event ({"error": …}) in place of a chunk.
	Error json.RawMessage `json:"error"`
}

// wireFunction is a function call of an answer.
type wireFunction struct {
	Name      wireString `json:"name"`
	Arguments wireString `json:"arguments"`
}

// wireString is a string of an answer. A value of another kind is kept as
// its JSON text, as the official SDK keeps it: some servers send a call's
// arguments as an object rather than a string holding one, and the call
// must not lose them.
type wireString string

func (s *wireString) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = wireString(v)
	case string(b) == "null":
		*s = ""
	default:
		*s = wireString(b)
	}
	return nil
}

// unmarshalLenient decodes b into v, leaving a field whose value has
// another type than expected at its zero value (encoding/json fills the
// rest and reports the first such field, which is ignored here): servers
// differ in small ways, and a field this package does not need must not
// fail an answer. A body that is not JSON is an error.
func unmarshalLenient(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return nil
	}
	return err
}

// eventReader reads the data of text/event-stream events: "data:" lines
// joined by newlines, dispatched at a blank line; comments, other fields
// and events without data are skipped.
type eventReader struct {
	scn *bufio.Scanner
}

func newEventReader(r io.Reader) *eventReader {
	scn := bufio.NewScanner(r)
	scn.Buffer(nil, 32<<20) // a chunk is one line: room for a long tool call
	return &eventReader{scn: scn}
}

// next returns the next event's data, io.EOF at the end of the stream (an
// event not closed by a blank line is dropped), or the read error.
func (e *eventReader) next() ([]byte, error) {
	var data []byte
	for e.scn.Scan() {
		line := e.scn.Bytes()
		if len(line) == 0 {
			if len(data) == 0 {
				continue
			}
			return data, nil
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(name) == "data" {
			data = append(data, value...)
			data = append(data, '\n')
		}
	}
	if err := e.scn.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// assembler rebuilds, from the chunks of a streamed completion, the
// completion a non-streamed call would have returned, so both map through
// mapResponse alike. Only choice 0 counts (n is never set).
type assembler struct {
	chunks   int
	model    string
	text     strings.Builder
	calls    []*callParts
	slot     map[int64]int // a delta's tool-call index → position in calls
	usage    usage
	finished bool // a finish_reason arrived
	gaveText bool
}

// callParts is one tool call being assembled; its arguments usually come
// in many fragments, its id, type and name in the first.
type callParts struct {
	id, typ    string
	name, args strings.Builder
}

func (a *assembler) add(c *chunk, onText func(string)) {
	a.chunks++
	if a.model == "" {
		a.model = string(c.Model)
	}
	if c.Usage != nil {
		// Sent in the last chunk (stream_options.include_usage); some
		// servers send a running count in every chunk, the last one wins.
		a.usage = *c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if text := string(ch.Delta.Content); text != "" {
			a.text.WriteString(text)
			a.gaveText = true
			onText(text)
		}
		for _, d := range ch.Delta.ToolCalls {
			id := string(d.ID)
			i, ok := a.slot[d.Index]
			// A delta naming another id than its index's call starts a new call:
			// some servers (older Ollama) send whole calls, all with index 0.
			if !ok || (id != "" && a.calls[i].id != "" && id != a.calls[i].id) {
				if a.slot == nil {
					a.slot = map[int64]int{}
				}
				i = len(a.calls)
				a.slot[d.Index] = i
				a.calls = append(a.calls, &callParts{})
			}
			p := a.calls[i]
			if id != "" {
				p.id = id
			}
			if d.Type != "" {
				p.typ = string(d.Type)
			}
			p.name.WriteString(string(d.Function.Name))
			p.args.WriteString(string(d.Function.Arguments))
		}
		if ch.FinishReason != "" {
			a.finished = true
		}
	}
}

func (a *assembler) completion() *completion {
	var ch choice
	ch.Message.Content = wireString(a.text.String())
	for _, c := range a.calls {
		tc := wireToolCall{ID: wireString(c.id), Type: wireString(c.typ), Function: wireFunction{Name: wireString(c.name.String()), Arguments: wireString(c.args.String())}}
		if c.typ != "" && c.typ != "function" {
			tc.Custom.Name, tc.Custom.Input = tc.Function.Name, tc.Function.Arguments
		}
		ch.Message.ToolCalls = append(ch.Message.ToolCalls, tc)
	}
	return &completion{Model: wireString(a.model), Choices: []choice{ch}, Usage: a.usage}
}

// decodeCompletion reads a whole (non-streamed) Chat Completions body.
func decodeCompletion(b []byte) (*llm.Response, error) {
	var res completion
	if err := unmarshalLenient(b, &res); err != nil {
		return nil, fmt.Errorf("openai: read chat completion: %w", err)
	}
	return mapResponse(&res)
}

// mapResponse maps a completion, whole or assembled from a stream. OpenAI's
// prompt_tokens already counts the cached tokens, as llm.Usage wants.
func mapResponse(res *completion) (*llm.Response, error) {
	if res == nil || len(res.Choices) == 0 || slices.ContainsFunc(res.Choices, func(c choice) bool { return c.notObject }) {
		return nil, errors.New("openai: chat completion returned no choices")
	}
	msg := res.Choices[0].Message
	out := &llm.Response{
		Text:  string(msg.Content),
		Model: string(res.Model),
		Usage: llm.Usage{
			InputTokens:       int(res.Usage.PromptTokens),
			OutputTokens:      int(res.Usage.CompletionTokens),
			CachedInputTokens: int(res.Usage.PromptTokensDetails.CachedTokens),
			CacheWriteTokens:  int(res.Usage.PromptTokensDetails.CacheWriteTokens),
		},
	}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			// Custom (free-text) tools are never offered, so a custom call is
			// surfaced as an error the loop can answer instead of dropped.
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{
				ID: string(tc.ID), Name: string(tc.Custom.Name), Arguments: string(tc.Custom.Input),
				ArgumentsError: fmt.Sprintf("unsupported tool call type %q", tc.Type),
			})
			continue
		}
		call := llm.ToolCall{ID: string(tc.ID), Name: string(tc.Function.Name), Arguments: string(tc.Function.Arguments)}
		// Some servers (Ollama, vLLM) send "" for a call without arguments.
		if strings.TrimSpace(call.Arguments) == "" {
			call.Arguments = "{}"
		}
		call.ArgumentsError = ArgumentsError(call.Arguments)
		out.ToolCalls = append(out.ToolCalls, call)
	}
	return out, nil
}

// ArgumentsError returns why args is not a JSON object, or "" when it is.
func ArgumentsError(args string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil {
		return "arguments are not a valid JSON object: " + err.Error()
	}
	if obj == nil {
		return "arguments are not a valid JSON object: null"
	}
	return ""
}
