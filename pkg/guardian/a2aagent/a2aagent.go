// Package a2aagent is the guardian that asks a guardian agent over A2A
// (CLIENTAGENT_GUARDIAN=a2a:<agent URL>[#skill]), as docs/design.md §9's
// guardian_validate does. Each check is one blocking message/send (JSON-RPC)
// whose message holds one DataPart
//
//	{"kind": "request"|"model_output"|"tool_call"|"tool_result", "text": "…", "tool": "…", "arguments": {…}}
//
// (tool and arguments only when set; a tool call's text is the canonical
// JSON of its arguments) and names the skill in its metadata (skillId, as
// pkg/agents does). The call is made here, with net/http, not with
// a2a-go's client, which links gRPC's transport into every function that
// checks (docs/benchmarks.md); only the protocol's types come from a2a-go.
// The agent answers with a message, or a completed task,
// carrying a DataPart — or a TextPart holding a JSON object —
//
//	{"decision": "allowed"|"blocked", "reason": "…"}
//
// where decision may also be allow, block or redact (redact with "text",
// the redacted text), and "rule" optionally names the agent's rule.
// Anything else — a failed task, a transport error, an answer without a
// decision — is an error, which the guardian.Checker turns into a failed
// check. The agent is never offered to the model as a tool and must not be
// listed among the specialists.
package a2aagent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/keepalive"
)

// DefaultSkill is the skill asked when the URL names none.
const DefaultSkill = "guardian_check"

// Client is a guardian.Guardian backed by a guardian agent; it is safe
// for concurrent use.
type Client struct {
	url, skill string
	hc         *http.Client
}

var _ guardian.Guardian = (*Client)(nil)

// New returns the client of the agent at spec, its JSON-RPC base URL with
// an optional "#skill" (default DefaultSkill). hc carries the calls (nil:
// Go's default client); on AWS it is the platform's agent client, which
// signs requests to Lambda Function URLs (agentauth.ClientFromEnv). The
// deadline of a call is the context's (guardian.Checker sets it).
func New(spec string, hc *http.Client) (*Client, error) {
	u, skill, _ := strings.Cut(strings.TrimSpace(spec), "#")
	u = strings.TrimRight(u, "/")
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return nil, fmt.Errorf("guardian agent URL %q: want http:// or https://", u)
	}
	if skill == "" {
		skill = DefaultSkill
	}
	if hc == nil {
		hc = keepalive.Client()
	}
	return &Client{url: u, skill: skill, hc: hc}, nil
}

// Name is "a2a:<url>#<skill>", the rule of decisions that name none.
func (c *Client) Name() string { return "a2a:" + c.url + "#" + c.skill }

// Check sends in to the agent and reads its decision.
func (c *Client) Check(ctx context.Context, in guardian.Input) (guardian.Decision, error) {
	data := map[string]any{"kind": string(in.Kind), "text": in.Checked()}
	if in.Tool != "" {
		data["tool"] = in.Tool
	}
	if in.Arguments != nil {
		data["arguments"] = in.Arguments
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: data})
	msg.Metadata = map[string]any{"skillId": c.skill}

	blocking := true
	res, err := c.send(ctx, &a2a.MessageSendParams{Config: &a2a.MessageSendConfig{Blocking: &blocking}, Message: msg})
	if err != nil {
		if ctx.Err() != nil {
			return guardian.Decision{}, fmt.Errorf("guardian agent %s: %w", c.url, ctx.Err())
		}
		return guardian.Decision{}, fmt.Errorf("guardian agent %s: %w", c.url, err)
	}
	var parts []a2a.Part
	switch r := res.(type) {
	case *a2a.Message:
		parts = r.Parts
	case *a2a.Task:
		if r.Status.State != a2a.TaskStateCompleted {
			return guardian.Decision{}, fmt.Errorf("guardian agent %s left the task %s: %s", c.url, r.Status.State, statusText(r))
		}
		if r.Status.Message != nil {
			parts = append(parts, r.Status.Message.Parts...)
		}
		for _, a := range r.Artifacts {
			if a != nil {
				parts = append(parts, a.Parts...)
			}
		}
	default:
		return guardian.Decision{}, fmt.Errorf("guardian agent %s answered with an unexpected result %T", c.url, res)
	}
	d, err := decision(parts)
	if err != nil {
		return guardian.Decision{}, fmt.Errorf("guardian agent %s: %w", c.url, err)
	}
	if d.Action == guardian.Redact && d.Text == "" && in.Kind != guardian.ToolCall && (in.Kind != guardian.ModelOutput || in.Arguments == nil) {
		return guardian.Decision{}, fmt.Errorf("guardian agent %s: a redact decision without the redacted text", c.url)
	}
	if d.Rule == "" {
		d.Rule = c.Name()
	}
	return d, nil
}

// rpcResponse is a JSON-RPC 2.0 response.
type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// send makes the JSON-RPC call message/send and returns its result, a
// message or a task.
func (c *Client) send(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "message/send", "params": params, "id": rand.Text()})
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("unexpected HTTP status: %s", res.Status)
	}
	var rpc rpcResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 4<<20)).Decode(&rpc); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	if rpc.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error %d: %s", rpc.Error.Code, rpc.Error.Message)
	}
	event, err := a2a.UnmarshalEventJSON(rpc.Result)
	if err != nil {
		return nil, fmt.Errorf("result is not a message or a task: %w", err)
	}
	switch e := event.(type) {
	case *a2a.Message:
		return e, nil
	case *a2a.Task:
		return e, nil
	default:
		return nil, fmt.Errorf("result is a %T, not a message or a task", event)
	}
}

// answer is the agent's decision object.
type answer struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Rule     string `json:"rule"`
	Text     string `json:"text"`
}

var actions = map[string]guardian.Action{
	"allowed": guardian.Allow, "allow": guardian.Allow,
	"blocked": guardian.Block, "block": guardian.Block,
	"redacted": guardian.Redact, "redact": guardian.Redact,
}

// decision reads the first part that holds a decision object.
func decision(parts []a2a.Part) (guardian.Decision, error) {
	for _, p := range parts {
		var raw []byte
		switch v := p.(type) {
		case a2a.DataPart:
			raw, _ = json.Marshal(v.Data)
		case *a2a.DataPart:
			raw, _ = json.Marshal(v.Data)
		case a2a.TextPart:
			raw = []byte(strings.TrimSpace(v.Text))
		case *a2a.TextPart:
			raw = []byte(strings.TrimSpace(v.Text))
		}
		var a answer
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &a) != nil || a.Decision == "" {
			continue
		}
		act, ok := actions[strings.ToLower(strings.TrimSpace(a.Decision))]
		if !ok {
			return guardian.Decision{}, fmt.Errorf("unknown decision %q", a.Decision)
		}
		return guardian.Decision{Action: act, Reason: a.Reason, Rule: a.Rule, Text: a.Text}, nil
	}
	return guardian.Decision{}, errors.New("the answer holds no decision")
}

func statusText(t *a2a.Task) string {
	if t.Status.Message != nil {
		var texts []string
		for _, p := range t.Status.Message.Parts {
			switch v := p.(type) {
			case a2a.TextPart:
				texts = append(texts, v.Text)
			case *a2a.TextPart:
				texts = append(texts, v.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, " ")
		}
	}
	return "no message given"
}
