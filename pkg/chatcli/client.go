package chatcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Turn statuses of the API contract (docs/api/openapi.yaml, Turn.status).
const (
	StatusRunning          = "running"
	StatusAwaitingInput    = "awaiting_input"
	StatusAwaitingApproval = "awaiting_approval"
	StatusSucceeded        = "succeeded"
	StatusFailed           = "failed"
	StatusExpired          = "expired"
	StatusSuperseded       = "superseded"
	StatusCancelled        = "cancelled"
	StatusBlocked          = "blocked"
)

// Turn is the API's view of one user turn (docs/api/openapi.yaml "Turn").
type Turn struct {
	ID        string        `json:"turn_id"`
	Status    string        `json:"status"`
	Text      string        `json:"text,omitempty"`
	Reply     string        `json:"reply,omitempty"`
	Form      *Form         `json:"form,omitempty"`
	Approval  *Approval     `json:"approval,omitempty"`
	Artifacts []ArtifactRef `json:"artifacts,omitempty"`
	Steps     []Step        `json:"steps,omitempty"`
	LLMCalls  int           `json:"llm_calls"`
	Tokens    int           `json:"tokens"`
	CostUSD   float64       `json:"cost_usd"`
}

// Form is the open questions of a turn that waits for input.
type Form struct {
	Calls []FormCall `json:"calls"`
}

// FormCall is one paused call and the fields it needs.
type FormCall struct {
	CallID string      `json:"call_id"`
	Tool   string      `json:"tool"`
	Fields []FormField `json:"fields"`
}

// FormField is one typed question (type string, integer, number or boolean).
type FormField struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Description string   `json:"description,omitempty"`
	Required    bool     `json:"required"`
	Enum        []string `json:"enum,omitempty"`
}

// Approval is the batch of calls a turn waits to have approved.
type Approval struct {
	// ID names exactly these calls and arguments (opaque); an answer must
	// carry it, so that it never approves a batch that changed since.
	ID    string         `json:"id"`
	Calls []ApprovalCall `json:"calls"`
}

// ApprovalCall is one call with the exact arguments the approval covers.
type ApprovalCall struct {
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Steps is a workflow call's plan.
	Steps []struct {
		Name      string          `json:"name"`
		Skill     string          `json:"skill"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"steps,omitempty"`
}

// ArtifactRef names an artifact of the conversation.
type ArtifactRef struct {
	ID          string `json:"artifact_id"`
	Name        string `json:"name"`
	MimeType    string `json:"mime_type"`
	Description string `json:"description,omitempty"`
}

// Step is one entry of a turn's progress ("llm" is an LLM call).
type Step struct {
	Tool      string `json:"tool"`
	CallID    string `json:"call_id,omitempty"`
	Status    string `json:"status"`
	StartedAt string `json:"started_at,omitempty"`
	EndedAt   string `json:"ended_at,omitempty"`
}

// Event is one event of a conversation's stream (docs/api/openapi.yaml, GET …/events).
// Which fields are set depends on Type: turn.started (Text), step.started
// and step.ended (Tool, CallID, Status), llm.delta (Text, Offset, LLMCall),
// form, approval, artifact (Artifact), turn.ended (Status, Reply, LLMCalls).
type Event struct {
	ID         string       `json:"-"` // the SSE id, for Last-Event-ID
	Type       string       `json:"type"`
	TurnID     string       `json:"turn_id"`
	At         string       `json:"at,omitempty"`
	Text       string       `json:"text,omitempty"`
	Tool       string       `json:"tool,omitempty"`
	CallID     string       `json:"call_id,omitempty"`
	Status     string       `json:"status,omitempty"`
	DurationMS int64        `json:"duration_ms,omitempty"`
	Offset     int          `json:"offset"`
	LLMCall    int          `json:"llm_call,omitempty"`
	Reply      string       `json:"reply,omitempty"`
	LLMCalls   int          `json:"llm_calls,omitempty"`
	Artifact   *ArtifactRef `json:"artifact,omitempty"`
}

// Input is the body of POST …/turns/{tid}/input.
type Input struct {
	Answers map[string]map[string]any `json:"answers,omitempty"`
	// Files names uploads (artifact ids) made for this reply.
	Files    []string  `json:"files,omitempty"`
	Approval *Decision `json:"approval,omitempty"`
}

// Decision answers a pending approval.
type Decision struct {
	ID       string `json:"id"`       // the Approval.ID answered
	Decision string `json:"decision"` // approve or reject
	Note     string `json:"note,omitempty"`
	// Arguments replaces calls' arguments with the user's edits, by call
	// id; only with approve.
	Arguments map[string]json.RawMessage `json:"arguments,omitempty"`
}

// APIError is an error answer of the API ({"error": {"code", "message"}}).
type APIError struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After (zero when absent): a 503
	// (store_unavailable, store_full) says how long to wait.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.Status, e.Code)
}

// IsClientError reports whether err is a 4xx answer of the API.
func IsClientError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500
}

// Unavailable returns the 503 answer err carries (the service's store did
// not answer, or is full), or nil.
func Unavailable(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
		return ae
	}
	return nil
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Client calls the clientagent HTTP API with a bearer token.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
	// Timeout bounds each request; zero means 30s.
	Timeout time.Duration
}

// Do sends one API request with body of contentType and decodes the JSON
// answer into out (copies it, for an io.Writer; nil: ignores it); an
// error answer is an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 {
		return answerError(method, path, res)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case io.Writer:
		if _, err := io.Copy(o, res.Body); err != nil {
			return fmt.Errorf("%s %s: read body: %w", method, path, err)
		}
		return nil
	default:
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
		return nil
	}
}

// answerError reads an error answer into an *APIError.
func answerError(method, path string, res *http.Response) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		// Message is API Gateway's own error shape ({"message"}), e.g. a
		// body over Lambda's payload limit refused before the function.
		Message string `json:"message"`
	}
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	ae := &APIError{Status: res.StatusCode, Code: fmt.Sprintf("http_%d", res.StatusCode), Message: fmt.Sprintf("%s %s failed", method, path),
		RetryAfter: retryAfter(res.Header.Get("Retry-After"), time.Now())}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		ae.Code, ae.Message = e.Error.Code, e.Error.Message
	} else if e.Message != "" {
		ae.Message = fmt.Sprintf("%s %s: %s", method, path, e.Message)
	}
	return ae
}

// DoJSON is Do with in sent as JSON (nil: no body). Other clients of the
// API (pkg/eval) use it, so every client reads answers and errors alike.
func (c *Client) DoJSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	return c.Do(ctx, method, path, body, ct, out)
}

// CreateConversation starts a conversation and returns its id.
func (c *Client) CreateConversation(ctx context.Context) (string, error) {
	var out struct {
		ID string `json:"conversation_id"`
	}
	if err := c.DoJSON(ctx, http.MethodPost, "/v1/conversations", struct{}{}, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("create conversation: empty conversation_id")
	}
	return out.ID, nil
}

// SendMessage posts a user message and returns the started turn's id.
func (c *Client) SendMessage(ctx context.Context, cid, text string, files []string) (string, error) {
	in := struct {
		Text  string   `json:"text"`
		Files []string `json:"files,omitempty"`
	}{text, files}
	var out struct {
		ID string `json:"turn_id"`
	}
	if err := c.DoJSON(ctx, http.MethodPost, "/v1/conversations/"+url.PathEscape(cid)+"/messages", in, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// Workflow is one workflow of GET /v1/catalog.
type Workflow struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Inputs      []struct {
		Path        string `json:"path"`
		Type        string `json:"type"`
		Description string `json:"description"`
	} `json:"inputs"`
}

// Workflows lists the catalog's workflow templates.
func (c *Client) Workflows(ctx context.Context) ([]Workflow, error) {
	var out struct {
		Workflows []Workflow `json:"workflows"`
	}
	err := c.DoJSON(ctx, http.MethodGet, "/v1/catalog", nil, &out)
	return out.Workflows, err
}

// GetTurn reads a turn's current state.
func (c *Client) GetTurn(ctx context.Context, cid, tid string) (Turn, error) {
	var t Turn
	err := c.DoJSON(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(cid)+"/turns/"+url.PathEscape(tid), nil, &t)
	return t, err
}

// SendInput answers a waiting turn (form answers or an approval decision).
func (c *Client) SendInput(ctx context.Context, cid, tid string, in Input) (Turn, error) {
	var t Turn
	err := c.DoJSON(ctx, http.MethodPost, "/v1/conversations/"+url.PathEscape(cid)+"/turns/"+url.PathEscape(tid)+"/input", in, &t)
	return t, err
}

// UploadArtifact stores a file for the next message and returns its id.
func (c *Client) UploadArtifact(ctx context.Context, cid, name, mimeType string, body io.Reader) (ArtifactRef, error) {
	var a ArtifactRef
	err := c.Do(ctx, http.MethodPost, "/v1/conversations/"+url.PathEscape(cid)+"/artifacts?name="+url.QueryEscape(name), body, mimeType, &a)
	return a, err
}

// DownloadArtifact copies an artifact's bytes to w.
func (c *Client) DownloadArtifact(ctx context.Context, cid, aid string, w io.Writer) error {
	return c.Do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(cid)+"/artifacts/"+url.PathEscape(aid), nil, "", w)
}

// CancelTurn stops a running or waiting turn (POST …/cancel). The answer is
// the turn, cancelled; a turn that has already ended is a 409 *APIError.
func (c *Client) CancelTurn(ctx context.Context, cid, tid string) (Turn, error) {
	var t Turn
	err := c.DoJSON(ctx, http.MethodPost, "/v1/conversations/"+url.PathEscape(cid)+"/turns/"+url.PathEscape(tid)+"/cancel", struct{}{}, &t)
	return t, err
}

// streamIdle is how long a stream may stay silent before it counts as
// broken: the server sends a heartbeat comment every 15 s.
const streamIdle = 45 * time.Second

// Events reads the events of one turn of a conversation (GET …/events?turn=,
// Server-Sent Events) and hands each to fn, resuming after lastID when it
// is set. It returns nil when the server ends the stream (it does after a
// few minutes; the caller reconnects with the last event's ID), fn's error
// when fn returns one, and an error when the stream cannot be read (an
// *APIError when the server refused it).
func (c *Client) Events(ctx context.Context, cid, tid, lastID string, fn func(Event) error) error {
	path := "/v1/conversations/" + url.PathEscape(cid) + "/events?turn=" + url.QueryEscape(tid)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	// Until the answer's headers arrive the usual request timeout applies;
	// after that only silence (no event, no heartbeat) ends the stream.
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	idle := time.AfterFunc(timeout, cancel)
	defer idle.Stop()
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 {
		return answerError(http.MethodGet, path, res)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return &APIError{Status: res.StatusCode, Code: "not_a_stream", Message: fmt.Sprintf("GET %s answered %q, not an event stream", path, ct)}
	}
	idle.Reset(streamIdle)
	r := bufio.NewReaderSize(res.Body, 64<<10)
	var (
		id   string
		data []string
	)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			switch {
			case parent.Err() != nil:
				return parent.Err()
			case errors.Is(err, io.EOF):
				return nil
			}
			return fmt.Errorf("GET %s: read stream (silent for %s?): %w", path, streamIdle, err)
		}
		idle.Reset(streamIdle)
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if len(data) > 0 {
				var ev Event
				if json.Unmarshal([]byte(strings.Join(data, "\n")), &ev) == nil {
					ev.ID = id
					if err := fn(ev); err != nil {
						return err
					}
				}
			}
			data = data[:0]
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: the heartbeat
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "data":
			data = append(data, value)
		}
	}
}
