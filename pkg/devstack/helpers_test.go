package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/wire"
)

// model is a scripted LLM for one test: decide sees each request and
// answers it; every request is recorded so tests count LLM calls and check
// the transcripts the provider got.
//
// The platform stores its own call ids (turn.CallID), never the
// provider's; decide sees the ids it gave back (by tool and arguments, in
// order), so a test can name its calls ("p1") while the stored ids stay
// the platform's.
type model struct {
	mu      sync.Mutex
	reqs    []llm.Request
	decide  func(req llm.Request) *llm.Response
	emitted []llm.ToolCall
}

func (m *model) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	req = m.ownIDs(req)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	r := m.decide(req)
	m.mu.Lock()
	m.emitted = append(m.emitted, r.ToolCalls...)
	m.mu.Unlock()
	r.Usage = llm.Usage{InputTokens: 100, OutputTokens: 10}
	return r, nil
}

// ownIDs rewrites the stored call ids of req to the ids this model gave.
func (m *model) ownIDs(req llm.Request) llm.Request {
	used := make([]bool, len(m.emitted))
	ids := map[string]string{}
	msgs := make([]llm.Message, len(req.Messages))
	for i, msg := range req.Messages {
		if len(msg.ToolCalls) > 0 {
			msg.ToolCalls = append([]llm.ToolCall(nil), msg.ToolCalls...)
			for k, c := range msg.ToolCalls {
				for j, e := range m.emitted {
					if !used[j] && e.ID != "" && e.Name == c.Name && e.Arguments == c.Arguments {
						used[j] = true
						ids[c.ID] = e.ID
						msg.ToolCalls[k].ID = e.ID
						break
					}
				}
			}
		}
		if own, ok := ids[msg.ToolCallID]; ok {
			msg.ToolCallID = own
		}
		msgs[i] = msg
	}
	req.Messages = msgs
	return req
}

func (m *model) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

func call(id, name string, args any) llm.ToolCall {
	b, _ := json.Marshal(args)
	return llm.ToolCall{ID: id, Name: name, Arguments: string(b)}
}

func calls(cs ...llm.ToolCall) *llm.Response { return &llm.Response{ToolCalls: cs} }
func answer(text string) *llm.Response       { return &llm.Response{Text: text} }

// toolResults are the tool messages after the last assistant message of
// the current turn's block, by call id.
func toolResults(req llm.Request) map[string]map[string]any {
	out := map[string]map[string]any{}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != llm.RoleTool {
			break
		}
		var v map[string]any
		_ = json.Unmarshal([]byte(m.Content), &v)
		out[m.ToolCallID] = v
	}
	return out
}

// lastUser is the newest user message of the request.
func lastUser(req llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

// assertProviderValid checks the provider invariant on a transcript: every
// assistant tool call is answered by exactly one tool message right after
// it, and no tool message stands without its call (docs/design.md §3.3, §3.4a).
func assertProviderValid(t *testing.T, msgs []llm.Message) {
	t.Helper()
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == llm.RoleTool {
			t.Fatalf("message %d: tool result %s without its call", i, m.ToolCallID)
		}
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		want := map[string]bool{}
		for _, c := range m.ToolCalls {
			want[c.ID] = true
		}
		j := i + 1
		for ; j < len(msgs) && msgs[j].Role == llm.RoleTool; j++ {
			if !want[msgs[j].ToolCallID] {
				t.Fatalf("message %d: result %s is not for the calls of message %d", j, msgs[j].ToolCallID, i)
			}
			delete(want, msgs[j].ToolCallID)
		}
		if len(want) > 0 {
			t.Fatalf("message %d: calls without results: %v", i, want)
		}
		i = j - 1
	}
}

// stack starts a local stack with model m (nil: the demo model).
func stack(t *testing.T, m llm.Provider, mutate ...func(*Config)) (*Stack, *client) {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), LLM: m}
	for _, f := range mutate {
		f(&cfg)
	}
	st, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	tok, err := st.Token("dev")
	if err != nil {
		t.Fatal(err)
	}
	return st, &client{t: t, base: st.URL(), token: tok}
}

// client speaks docs/api/openapi.yaml over real HTTP.
type client struct {
	t     testing.TB
	base  string
	token string
}

func (c *client) as(user string, st *Stack) *client {
	tok, err := st.Token(user)
	if err != nil {
		c.t.Fatal(err)
	}
	return &client{t: c.t, base: c.base, token: tok}
}

func (c *client) do(method, path string, body any, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

func (c *client) newConversation() string {
	c.t.Helper()
	var out struct {
		ID string `json:"conversation_id"`
	}
	if code := c.do("POST", "/v1/conversations", nil, &out); code != http.StatusCreated {
		c.t.Fatalf("POST /v1/conversations = %d, want 201", code)
	}
	return out.ID
}

func (c *client) send(cid, text string) string {
	c.t.Helper()
	var out struct {
		TurnID string `json:"turn_id"`
		Status string `json:"status"`
	}
	if code := c.do("POST", "/v1/conversations/"+cid+"/messages", map[string]any{"text": text}, &out); code != http.StatusAccepted {
		c.t.Fatalf("POST messages = %d, want 202", code)
	}
	return out.TurnID
}

func (c *client) turn(cid, tid string) wire.Turn {
	c.t.Helper()
	var v wire.Turn
	if code := c.do("GET", "/v1/conversations/"+cid+"/turns/"+tid, nil, &v); code != http.StatusOK {
		c.t.Fatalf("GET turn = %d, want 200", code)
	}
	return v
}

// wait polls the turn until its status leaves running.
func (c *client) wait(cid, tid string) wire.Turn {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		v := c.turn(cid, tid)
		if v.Status != "running" {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("turn %s still running after 90s", tid)
	return wire.Turn{}
}

// waitRunning polls the turn until a call of tool shows as running.
func (c *client) waitRunning(cid, tid, tool string) {
	c.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("no %s call of turn %s started", tool, tid)
		}
		for _, s := range c.turn(cid, tid).Steps {
			if s.Tool == tool && s.Status == "running" {
				return
			}
		}
	}
}

// boxSVG is a small SVG a specialist can rasterize: a black box.
const boxSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 50" width="100" height="50"><rect width="100" height="50" fill="#fff"/><path d="M10 10 L90 10 L90 40 L10 40 Z" fill="#000"/></svg>`

// upload posts body as an artifact of cid and returns its id.
func (c *client) upload(cid, name, mimeType, body string) string {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+"/v1/conversations/"+cid+"/artifacts?name="+name, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", mimeType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var up struct {
		ID string `json:"artifact_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&up)
	if resp.StatusCode != http.StatusCreated || up.ID == "" {
		c.t.Fatalf("upload = %d %+v", resp.StatusCode, up)
	}
	return up.ID
}

func (c *client) input(cid, tid string, body any) int {
	c.t.Helper()
	return c.do("POST", "/v1/conversations/"+cid+"/turns/"+tid+"/input", body, nil)
}

// decide answers the open approval of turn tid (its id from the view) with
// decision and the extra fields of the approval object.
func (c *client) decide(cid, tid, decision string, extra map[string]any) int {
	c.t.Helper()
	v := c.turn(cid, tid)
	ap := map[string]any{"decision": decision}
	if v.Approval != nil {
		ap["id"] = v.Approval.ID
	}
	for k, x := range extra {
		ap[k] = x
	}
	return c.input(cid, tid, map[string]any{"approval": ap})
}

// formCall is the call id of the open form's first call of turn tid.
func (c *client) formCall(cid, tid string) string {
	c.t.Helper()
	v := c.turn(cid, tid)
	if v.Form == nil || len(v.Form.Calls) == 0 {
		c.t.Fatalf("turn %s shows no form: %+v", tid, v)
	}
	return v.Form.Calls[0].CallID
}

// slowAgent is an A2A specialist (a2a-go server) whose skill sleeps, so a
// test can see calls of one batch overlap.
// waitStarted waits until the specialist has had a call (a cancel or a
// crash a test makes must come after the call's start), for up to 60 s.
func (a *slowAgent) waitStarted(t *testing.T) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); a.started.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the specialist never got the call")
		}
	}
}

type slowAgent struct {
	delay time.Duration
	// hold, when set, keeps each call until it is closed (or the delay).
	hold chan struct{}
	// started counts the calls that reached the specialist.
	started atomic.Int32
	// conns counts the connections its server accepted.
	conns atomic.Int64
	// noTasks serves it with a task store that keeps nothing
	// (discardTasks): every call finishes in the request that starts it.
	noTasks bool
	// instant answers each message in its request, as the local stack's
	// fast demo specialists do (pkg/demoagents, fastAgent), not through
	// a2a-go's task executor, whose event queue and goroutines per call
	// are the specialist's cost, not the platform's; it has no delay.
	instant bool
	mu      sync.Mutex
	runs    []span
}

type span struct{ start, end time.Time }

// ran is how many calls the agent has finished.
func (a *slowAgent) ran() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.runs)
}

func (a *slowAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	a.started.Add(1)
	start := time.Now()
	select {
	case <-time.After(a.delay):
	case <-a.hold:
	case <-ctx.Done():
	}
	return q.Write(ctx, a.finish(rc, start))
}

// finish records a call that started at start and returns its task: the
// text echoed, or failed for "boom".
func (a *slowAgent) finish(rc *a2asrv.RequestContext, start time.Time) *a2a.Task {
	var args map[string]any
	for _, p := range rc.Message.Parts {
		if d, ok := p.(a2a.DataPart); ok {
			args = d.Data
		}
	}
	a.mu.Lock()
	a.runs = append(a.runs, span{start, time.Now()})
	a.mu.Unlock()
	task := &a2a.Task{ID: rc.TaskID, ContextID: rc.ContextID}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: fmt.Sprintf("echo %v", args["text"])})}
	if args["text"] == "boom" {
		task.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: "the echo chamber collapsed"})}
	}
	return task
}

// instantAgent is slowAgent.instant's request handler: message/send is
// answered in the request; every other method is a2a-go's.
type instantAgent struct {
	a2asrv.RequestHandler
	ag *slowAgent
}

func (i instantAgent) OnSendMessage(_ context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	if p == nil || p.Message == nil {
		return nil, a2a.ErrInvalidParams
	}
	i.ag.started.Add(1)
	rc := &a2asrv.RequestContext{Message: p.Message, TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID()}
	return i.ag.finish(rc, time.Now()), nil
}

func (a *slowAgent) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return nil
}

// startSlowAgent serves slowAgent with a card carrying our schema extension.
func startSlowAgent(t *testing.T, delay time.Duration) (*slowAgent, string) {
	t.Helper()
	ag := &slowAgent{delay: delay}
	return ag, serveAgent(t, ag)
}

// serveAgent serves ag over A2A in an httptest server and returns its URL.
func serveAgent(t testing.TB, ag *slowAgent) string {
	t.Helper()
	return serveAgentWith(t, ag, nil)
}

// serveAgentWith is serveAgent with wrap (nil: none) around the server's handler.
func serveAgentWith(t testing.TB, ag *slowAgent, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	var h http.Handler = mux
	if wrap != nil {
		h = wrap(mux)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			ag.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	card := a2a.AgentCard{
		Name: "echo", Description: "Echoes text slowly", URL: srv.URL + "/", Version: "1",
		ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes: []string{"application/json"}, DefaultOutputModes: []string{"text/plain"},
		Capabilities: a2a.AgentCapabilities{Extensions: []a2a.AgentExtension{{
			URI: catalog.ExtensionURI,
			Params: map[string]any{"skills": map[string]any{"slow_echo": catalog.SkillExtension{
				InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			}}},
		}}},
		Skills: []a2a.AgentSkill{{ID: "slow_echo", Name: "slow echo", Description: "Echoes the text back.", Tags: []string{"echo"}}},
	}
	mux.HandleFunc("/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
	})
	var opts []a2asrv.RequestHandlerOption
	if ag.noTasks {
		opts = append(opts, a2asrv.WithTaskStore(discardTasks{}))
	}
	var rh a2asrv.RequestHandler = a2asrv.NewHandler(ag, opts...)
	if ag.instant {
		rh = instantAgent{RequestHandler: rh, ag: ag}
	}
	mux.Handle("/", a2asrv.NewJSONRPCHandler(rh))
	return srv.URL
}

// discardTasks is a task store that keeps nothing, as the fast demo
// agents' (pkg/demoagents): a2a-go's own in-memory store deep-copies every
// task it saves through encoding/gob, about 150 µs of the specialist's CPU
// per call, which the benchmarks of our overhead per step must not count.
type discardTasks struct{}

func (discardTasks) Save(context.Context, *a2a.Task) error { return nil }
func (discardTasks) Get(context.Context, a2a.TaskID) (*a2a.Task, error) {
	return nil, a2a.ErrTaskNotFound
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
