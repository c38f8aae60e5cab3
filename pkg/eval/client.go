package eval

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/clientagent/clientagent/pkg/apiclient"
	"github.com/clientagent/clientagent/pkg/wire"
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

// The API's vocabulary (pkg/wire) under the names the harness uses.
type (
	TurnView     = wire.Turn
	FormView     = wire.Form
	FormCall     = wire.FormCall
	FormField    = wire.FormField
	ApprovalView = wire.Approval
	ApprovalCall = wire.ApprovalCall
	ArtifactRef  = wire.ArtifactRef
	StepView     = wire.Step
	HistoryEntry = wire.HistoryEntry
	Message      = wire.Message
	Input        = wire.Input
	Decision     = wire.Decision
)

// api is the API client every caller of the API shares (its requests,
// answers and error answers, *apiclient.APIError).
func (c *Client) api() *apiclient.Client {
	return &apiclient.Client{BaseURL: c.BaseURL, Token: c.Token, HTTP: c.HTTP, Timeout: c.Timeout}
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
