package eval

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/clientagent/clientagent/pkg/chatcli"
)

// Client calls the clientagent HTTP API (docs/api/openapi.yaml) with a bearer token: the
// few routes a scenario needs.
type Client struct {
	BaseURL string
	Token   string
	// HTTP is the client to use (nil: http.DefaultClient).
	HTTP *http.Client
	// Timeout bounds each request (zero: 30s).
	Timeout time.Duration
}

// TurnView is the API's Turn, as far as the harness reads it.
type TurnView struct {
	TurnID       string        `json:"turn_id"`
	Status       string        `json:"status"`
	Reply        string        `json:"reply"`
	Form         *FormView     `json:"form,omitempty"`
	Approval     *ApprovalView `json:"approval,omitempty"`
	Artifacts    []ArtifactRef `json:"artifacts"`
	Steps        []StepView    `json:"steps"`
	LLMCalls     int           `json:"llm_calls"`
	Tokens       int           `json:"tokens"`
	CachedTokens int           `json:"cached_tokens"`
	CostUSD      float64       `json:"cost_usd"`
}

// FormView is an open form.
type FormView struct {
	Calls []FormCall `json:"calls"`
}

// FormCall is one call's form.
type FormCall struct {
	CallID string      `json:"call_id"`
	Tool   string      `json:"tool"`
	Fields []FormField `json:"fields"`
}

// FormField is one field of a form.
type FormField struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
}

// ApprovalView is an open approval.
type ApprovalView struct {
	ID    string         `json:"id"`
	Calls []ApprovalCall `json:"calls"`
}

// ApprovalCall is one call waiting for approval, with the arguments it
// will run with.
type ApprovalCall struct {
	CallID    string         `json:"call_id"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

// ArtifactRef is an artifact a turn produced.
type ArtifactRef struct {
	ID       string `json:"artifact_id"`
	Name     string `json:"name"`
	MimeType string `json:"mime_type"`
}

// StepView is one call of a turn, as its steps list shows it.
type StepView struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	Status string `json:"status"`
	// Parent is set on a step of a workflow call: the workflow ran it,
	// not the model.
	Parent string `json:"parent,omitempty"`
}

// HistoryEntry is a conversation_history entry of GET /v1/conversations/{cid}.
type HistoryEntry struct {
	TurnID     string         `json:"turn_id"`
	Role       string         `json:"role"`
	Kind       string         `json:"kind"`
	Tool       string         `json:"tool"`
	CallID     string         `json:"call_id"`
	Status     string         `json:"status"`
	ToolInputs map[string]any `json:"tool_inputs"`
}

// Message is the body of POST …/messages.
type Message struct {
	Text     string             `json:"text,omitempty"`
	Files    []string           `json:"files,omitempty"`
	Workflow *WorkflowSelection `json:"workflow,omitempty"`
}

// Input is the body of POST …/turns/{tid}/input.
type Input struct {
	Answers  map[string]map[string]any `json:"answers,omitempty"`
	Approval *Decision                 `json:"approval,omitempty"`
}

// Decision answers an approval.
type Decision struct {
	ID        string                    `json:"id"`
	Decision  string                    `json:"decision"`
	Note      string                    `json:"note,omitempty"`
	Arguments map[string]map[string]any `json:"arguments,omitempty"`
}

// api is the API client every caller of the API shares (its requests,
// answers and error answers, *chatcli.APIError).
func (c *Client) api() *chatcli.Client {
	return &chatcli.Client{BaseURL: c.BaseURL, Token: c.Token, HTTP: c.HTTP, Timeout: c.Timeout}
}

// Ping reads the catalog: a cheap check that the API answers and accepts
// the token, before any scenario runs.
func (c *Client) Ping(ctx context.Context) error {
	return c.api().Do(ctx, http.MethodGet, "/v1/catalog", nil, "", nil)
}

// CreateConversation starts a conversation and returns its id.
func (c *Client) CreateConversation(ctx context.Context) (string, error) {
	var out struct {
		ID string `json:"conversation_id"`
	}
	if err := c.api().DoJSON(ctx, http.MethodPost, "/v1/conversations", struct{}{}, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// DeleteConversation deletes a conversation.
func (c *Client) DeleteConversation(ctx context.Context, cid string) error {
	return c.api().Do(ctx, http.MethodDelete, "/v1/conversations/"+cid, nil, "", nil)
}

// Upload stores a file in the conversation and returns its artifact id.
func (c *Client) Upload(ctx context.Context, cid, name, mimeType string, data []byte) (string, error) {
	var out ArtifactRef
	path := "/v1/conversations/" + cid + "/artifacts?name=" + url.QueryEscape(name)
	if err := c.api().Do(ctx, http.MethodPost, path, bytes.NewReader(data), mimeType, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// Send posts a user message and returns the started turn's id.
func (c *Client) Send(ctx context.Context, cid string, m Message) (string, error) {
	var out struct {
		TurnID string `json:"turn_id"`
	}
	if err := c.api().DoJSON(ctx, http.MethodPost, "/v1/conversations/"+cid+"/messages", m, &out); err != nil {
		return "", err
	}
	return out.TurnID, nil
}

// Turn reads a turn.
func (c *Client) Turn(ctx context.Context, cid, tid string) (TurnView, error) {
	var v TurnView
	err := c.api().Do(ctx, http.MethodGet, "/v1/conversations/"+cid+"/turns/"+tid, nil, "", &v)
	return v, err
}

// Answer posts the answer to a turn's open form or approval.
func (c *Client) Answer(ctx context.Context, cid, tid string, in Input) error {
	return c.api().DoJSON(ctx, http.MethodPost, "/v1/conversations/"+cid+"/turns/"+tid+"/input", in, nil)
}

// Cancel stops a turn.
func (c *Client) Cancel(ctx context.Context, cid, tid string) error {
	return c.api().DoJSON(ctx, http.MethodPost, "/v1/conversations/"+cid+"/turns/"+tid+"/cancel", struct{}{}, nil)
}

// History reads the conversation's history entries.
func (c *Client) History(ctx context.Context, cid string) ([]HistoryEntry, error) {
	var out struct {
		History []HistoryEntry `json:"history"`
	}
	err := c.api().Do(ctx, http.MethodGet, "/v1/conversations/"+cid, nil, "", &out)
	return out.History, err
}
