package a2aserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
)

// bearerTransport adds a bearer token to the requests for one host: how
// the outer clientagent authenticates to the inner one (any RoundTripper
// in devstack.Config.AgentClient does).
type bearerTransport struct {
	host, token string
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == b.host {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// outerModel stands for the outer clientagent's LLM: it hands the user's
// request to the inner clientagent (its chat skill, or its publish_word
// workflow skill for "Publish …") and answers with the result.
func outerModel(req llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleTool {
		return &llm.Response{Text: "The inner clientagent answered: " + last.Content}, nil
	}
	if strings.HasPrefix(last.Content, "Publish") {
		return &llm.Response{ToolCalls: []llm.ToolCall{{Name: "publish_word", Arguments: `{"word":"Nested","channel":"web"}`}}}, nil
	}
	args, _ := json.Marshal(map[string]string{"text": last.Content})
	return &llm.Response{ToolCalls: []llm.ToolCall{{Name: "chat", Arguments: string(args)}}}, nil
}

// TestClientagentAsSpecialist registers one clientagent as a specialist of
// another (two local stacks): the inner one's form and its plan approval
// reach the outer user as forms of the outer turn, and the answers
// complete both turns, the inner one's files copied to the outer.
func TestClientagentAsSpecialist(t *testing.T) {
	t.Parallel()
	inner := startStack(t)
	innerTok, err := inner.Token("outer-clientagent")
	if err != nil {
		t.Fatal(err)
	}
	innerURL, _ := url.Parse(inner.URL())
	outer := startStack(t, func(c *devstack.Config) {
		c.LLM = scripted.Func(outerModel)
		c.Agents = []string{inner.URL() + "/a2a"}
		c.AgentClient = &http.Client{Transport: bearerTransport{host: innerURL.Host, token: innerTok}}
		c.FileOrigins = []string{inner.URL()} // the inner stack's artifact links are on loopback
	})
	tok, err := outer.Token("dev")
	if err != nil {
		t.Fatal(err)
	}
	c := &api{t: t, base: outer.URL(), token: tok}

	var cat struct {
		Skills []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"skills"`
	}
	c.do("GET", "/v1/catalog", nil, &cat)
	schemas := map[string]string{}
	for _, s := range cat.Skills {
		schemas[s.Name] = string(s.InputSchema)
	}
	if !strings.Contains(schemas["chat"], `"text"`) || !strings.Contains(schemas["flange_drawing"], `drawing.holes`) {
		t.Fatalf("outer catalog skills = %v, want the inner chat skill with a text input and flange_drawing with typed inputs", schemas)
	}

	// A form of the inner turn becomes a form of the outer one.
	cid := c.conversation()
	tid := c.message(cid, "Design a valve flange with 6 holes and 120 mm outer diameter")
	v := c.settle(cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) != 1 || v.Form.Calls[0].Tool != "chat" ||
		len(v.Form.Calls[0].Fields) != 1 || v.Form.Calls[0].Fields[0].Name != "material" {
		t.Fatalf("outer turn = %+v, want awaiting_input with the inner material form on the chat call", v)
	}
	c.do("POST", "/v1/conversations/"+cid+"/turns/"+tid+"/input",
		map[string]any{"answers": map[string]any{v.Form.Calls[0].CallID: map[string]any{"material": "steel"}}}, nil)
	v = c.settle(cid, tid)
	if v.Status != "succeeded" || !strings.Contains(v.Reply, "material steel") || len(v.Artifacts) != 1 || v.Artifacts[0].MimeType != "image/svg+xml" {
		t.Fatalf("outer turn after the answer = %+v, want succeeded with the inner reply and its SVG copied", v)
	}

	// The inner workflow's plan approval reaches the outer user too.
	tid = c.message(cid, "Publish the word Nested to the web")
	v = c.settle(cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) != 1 || v.Form.Calls[0].Fields[0].Name != "decision" ||
		!strings.Contains(v.Form.Calls[0].Note, "publish_artifact") {
		t.Fatalf("outer turn = %+v, want the inner approval as a decision form naming the plan's calls", v)
	}
	c.do("POST", "/v1/conversations/"+cid+"/turns/"+tid+"/input",
		map[string]any{"answers": map[string]any{v.Form.Calls[0].CallID: map[string]any{"decision": "approve"}}}, nil)
	v = c.settle(cid, tid)
	if v.Status != "succeeded" || !strings.Contains(v.Reply, "Published") {
		t.Fatalf("outer turn after approving = %+v, want succeeded with the publication", v)
	}
	pubs, err := inner.Publications.ListContext(t.Context())
	if err != nil || len(pubs) != 1 {
		t.Errorf("inner publications = %v (%v), want one", pubs, err)
	}
}

// api speaks the outer stack's HTTP API.
type api struct {
	t     *testing.T
	base  string
	token string
}

type turnView struct {
	Status string `json:"status"`
	Reply  string `json:"reply"`
	Form   *struct {
		Calls []struct {
			CallID string `json:"call_id"`
			Tool   string `json:"tool"`
			Note   string `json:"note"`
			Fields []struct {
				Name string `json:"name"`
			} `json:"fields"`
		} `json:"calls"`
	} `json:"form"`
	Artifacts []struct {
		MimeType string `json:"mime_type"`
	} `json:"artifacts"`
}

func (c *api) do(method, path string, body, out any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

func (c *api) conversation() string {
	var out struct {
		ID string `json:"conversation_id"`
	}
	c.do("POST", "/v1/conversations", nil, &out)
	return out.ID
}

func (c *api) message(cid, text string) string {
	var out struct {
		TurnID string `json:"turn_id"`
	}
	c.do("POST", "/v1/conversations/"+cid+"/messages", map[string]any{"text": text}, &out)
	return out.TurnID
}

// settle polls the turn until it waits for the user or has ended.
func (c *api) settle(cid, tid string) turnView {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var v turnView
		c.do("GET", "/v1/conversations/"+cid+"/turns/"+tid, nil, &v)
		if v.Status != "running" || time.Now().After(deadline) {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Issue 28: the README's two-stack prompt reaches the inner stack with the
// demo model on both: the outer one hands the text to the inner one's chat
// skill, whose PNG is copied to the outer turn.
func TestDemoModelReachesTheInnerStack(t *testing.T) {
	t.Parallel()
	inner := startStack(t)
	innerTok, err := inner.Token("outer-clientagent")
	if err != nil {
		t.Fatal(err)
	}
	innerURL, _ := url.Parse(inner.URL())
	outer := startStack(t, func(c *devstack.Config) {
		c.Agents = []string{inner.URL() + "/a2a"}
		c.AgentClient = &http.Client{Transport: bearerTransport{host: innerURL.Host, token: innerTok}}
		c.FileOrigins = []string{inner.URL()}
	})
	tok, err := outer.Token("dev")
	if err != nil {
		t.Fatal(err)
	}
	c := &api{t: t, base: outer.URL(), token: tok}
	cid := c.conversation()
	tid := c.message(cid, "Ask the inner clientagent: Create a PNG image with the word Nested")
	v := c.settle(cid, tid)
	png := false
	for _, a := range v.Artifacts {
		png = png || a.MimeType == "image/png"
	}
	if v.Status != "succeeded" || !strings.Contains(v.Reply, "chat answered") || !strings.Contains(v.Reply, "Nested") || !png {
		t.Fatalf("outer turn = %+v, want succeeded with the inner stack's answer and its PNG", v)
	}
}
