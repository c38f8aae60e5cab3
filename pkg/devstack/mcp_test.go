package devstack

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/mcp/mcptest"
	"github.com/clientagent/clientagent/pkg/record"
)

// everythingJS is the entry point of @modelcontextprotocol/server-everything
// (package.json's devDependencies; `npm ci` installs it).
var everythingJS = filepath.Join("..", "..", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")

// everythingServers starts server-everything over stdio and over
// streamable HTTP, or skips when node or the package is missing.
func everythingServers(t *testing.T) map[string]mcp.ServerConfig {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: cannot run @modelcontextprotocol/server-everything")
	}
	js, err := filepath.Abs(everythingJS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(js); err != nil {
		t.Skipf("%s is missing: run npm ci to install @modelcontextprotocol/server-everything", everythingJS)
	}
	port := 0
	for try := 0; port == 0; try++ {
		if try == 5 {
			t.Fatal("server-everything (streamableHttp) found each of 5 free ports taken")
		}
		port = startEverythingHTTP(t, node, js)
	}
	return map[string]mcp.ServerConfig{
		"stdio": {Name: "everything", Command: node, Args: []string{js, "stdio"}},
		"http":  {Name: "everything", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)},
	}
}

// startEverythingHTTP starts server-everything over streamable HTTP on a
// port that was free a moment ago, and returns the port once the server
// says it listens. Another test can take such a port first: the server
// then exits, and startEverythingHTTP returns 0 to be tried again.
func startEverythingHTTP(t *testing.T, node, js string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, js, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server-everything: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on port") {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false // it exited without listening
		}
	}()
	select {
	case ok := <-listening:
		if ok {
			return port
		}
		return 0
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything (streamableHttp) did not listen within 60s")
		return 0
	}
}

// catalogSkills is GET /v1/catalog's skills by name.
func catalogSkills(c *client) map[string]catalog.SkillInfo {
	c.t.Helper()
	var cat struct {
		Skills []catalog.SkillInfo `json:"skills"`
	}
	if code := c.do("GET", "/v1/catalog", nil, &cat); code != http.StatusOK {
		c.t.Fatalf("GET /v1/catalog = %d", code)
	}
	out := map[string]catalog.SkillInfo{}
	for _, s := range cat.Skills {
		out[s.Name] = s
	}
	return out
}

// oneCall is a model that makes one call of tool on the user's first
// message and then answers with what the call's result said.
func oneCall(tool string, args any) *model {
	return &model{decide: func(req llm.Request) *llm.Response {
		for _, r := range toolResults(req) {
			b, _ := json.Marshal(r)
			return answer("result: " + string(b))
		}
		return calls(call("m1", tool, args))
	}}
}

func TestMCPServerEverything(t *testing.T) {
	servers := everythingServers(t)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			sc := servers[transport]
			// A stdio listing starts node: on a loaded machine that takes
			// longer than the default 10 s (issue 31: the catalog lacked
			// the server's tools in 3 of 3 loaded runs).
			withMCP := func(cfg *Config) { cfg.MCP, cfg.MCPFetchTimeout = []mcp.ServerConfig{sc}, 90*time.Second }

			t.Run("catalog", func(t *testing.T) {
				_, c := stack(t, nil, withMCP)
				skills := catalogSkills(c)
				for _, name := range []string{"everything_echo", "everything_get-sum", "everything_get-tiny-image", "everything_trigger-elicitation-request"} {
					if _, ok := skills[name]; !ok {
						t.Errorf("GET /v1/catalog lacks %s", name)
					}
				}
				if s := skills["everything_echo"]; s.Unavailable || !strings.Contains(s.Description, "Echo") || !strings.Contains(string(s.InputSchema), `"message"`) {
					t.Errorf("everything_echo = %+v", s)
				}
			})

			// Issue 28: the README's MCP prompt works with the demo model.
			t.Run("demo model", func(t *testing.T) {
				_, c := stack(t, nil, withMCP)
				cid := c.newConversation()
				v := c.wait(cid, c.send(cid, "Call everything_echo with message hello from the demo"))
				if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, "hello from the demo") {
					t.Fatalf("turn = %s %q, want succeeded with the echo", v.Status, v.Reply)
				}
			})

			t.Run("call", func(t *testing.T) {
				m := oneCall("everything_get-sum", map[string]any{"a": 2, "b": 40})
				_, c := stack(t, m, withMCP)
				cid := c.newConversation()
				v := c.wait(cid, c.send(cid, "what is 2 + 40?"))
				if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, "42") || !strings.Contains(v.Reply, `"status":"succeeded"`) {
					t.Fatalf("turn = %s %q, want succeeded with the sum 42", v.Status, v.Reply)
				}
			})

			t.Run("image", func(t *testing.T) {
				m := oneCall("everything_get-tiny-image", map[string]any{})
				_, c := stack(t, m, withMCP)
				cid := c.newConversation()
				v := c.wait(cid, c.send(cid, "show me the logo"))
				if v.Status != record.StatusSucceeded || len(v.Artifacts) != 1 || v.Artifacts[0].MimeType != "image/png" {
					t.Fatalf("turn = %s artifacts %+v, want one PNG artifact", v.Status, v.Artifacts)
				}
			})

			t.Run("elicitation", func(t *testing.T) {
				m := oneCall("everything_trigger-elicitation-request", map[string]any{})
				_, c := stack(t, m, withMCP)
				cid := c.newConversation()
				tid := c.send(cid, "ask me")
				v := c.wait(cid, tid)
				if v.Status != record.StatusAwaitingInput || v.Form == nil || len(v.Form.Calls) != 1 {
					t.Fatalf("turn = %s form %+v, want awaiting_input with the server's form", v.Status, v.Form)
				}
				fc := v.Form.Calls[0]
				var name *catalog.FormField
				for i, f := range fc.Fields {
					if f.Name == "name" {
						name = &fc.Fields[i]
					}
				}
				if name == nil || !name.Required || fc.Tool != "everything_trigger-elicitation-request" {
					t.Fatalf("form = %+v, want the elicitation's required name field", fc)
				}
				if code := c.input(cid, tid, map[string]any{"answers": map[string]any{fc.CallID: map[string]any{"name": "Ada Lovelace", "check": true}}}); code != http.StatusAccepted {
					t.Fatalf("answer = %d, want 202", code)
				}
				v = c.wait(cid, tid)
				if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, "Ada Lovelace") || !strings.Contains(v.Reply, "provided the requested information") {
					t.Fatalf("turn after the answer = %s %q, want the server's accepted answer", v.Status, v.Reply)
				}
			})
		})
	}
}

// The go-sdk test server: isError, an image, a destructive tool, an
// elicitation through the multi round-trip, list_changed, a server going
// down mid-turn.
func TestMCPGoServer(t *testing.T) {
	t.Parallel()
	withServer := func(srv *mcptest.Server) func(*Config) {
		return func(cfg *Config) { cfg.MCP = []mcp.ServerConfig{{Name: "go", URL: srv.URL}} }
	}

	t.Run("isError", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		m := oneCall("go_fail", map[string]any{})
		_, c := stack(t, m, withServer(srv))
		cid := c.newConversation()
		v := c.wait(cid, c.send(cid, "break it"))
		if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, `"status":"failed"`) || !strings.Contains(v.Reply, "the widget is broken") {
			t.Fatalf("turn = %s %q, want the model told the call failed", v.Status, v.Reply)
		}
	})

	t.Run("image", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		m := oneCall("go_image", map[string]any{})
		st, c := stack(t, m, withServer(srv))
		cid := c.newConversation()
		v := c.wait(cid, c.send(cid, "draw"))
		if v.Status != record.StatusSucceeded || len(v.Artifacts) != 1 || v.Artifacts[0].MimeType != "image/png" {
			t.Fatalf("turn = %s artifacts %+v, want the image as an artifact", v.Status, v.Artifacts)
		}
		req, _ := http.NewRequest("GET", st.URL()+"/v1/conversations/"+cid+"/artifacts/"+v.Artifacts[0].ID, nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET artifact = %d, want 200", resp.StatusCode)
		}
	})

	t.Run("destructive waits for approval", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		m := oneCall("go_delete_file", map[string]any{"path": "/tmp/x"})
		_, c := stack(t, m, withServer(srv))
		if s := catalogSkills(c)["go_delete_file"]; !s.RequiresApproval {
			t.Errorf("go_delete_file requires_approval = false, want true (destructiveHint)")
		}
		cid := c.newConversation()
		tid := c.send(cid, "delete /tmp/x")
		v := c.wait(cid, tid)
		if v.Status != record.StatusAwaitingApproval || v.Approval == nil {
			t.Fatalf("turn = %s, want awaiting_approval", v.Status)
		}
		if n := srv.Calls("delete_file"); n != 0 {
			t.Fatalf("delete_file ran %d times before the approval", n)
		}
		if code := c.decide(cid, tid, "approve", nil); code != http.StatusAccepted {
			t.Fatalf("approve = %d", code)
		}
		v = c.wait(cid, tid)
		if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, "deleted /tmp/x") || srv.Calls("delete_file") != 1 {
			t.Fatalf("turn after approval = %s %q (ran %d), want it deleted once", v.Status, v.Reply, srv.Calls("delete_file"))
		}
	})

	t.Run("elicitation", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		m := oneCall("go_order", map[string]any{"item": "pens"})
		_, c := stack(t, m, withServer(srv))
		cid := c.newConversation()
		tid := c.send(cid, "order pens")
		v := c.wait(cid, tid)
		if v.Status != record.StatusAwaitingInput || v.Form == nil {
			t.Fatalf("turn = %s, want awaiting_input", v.Status)
		}
		fc := v.Form.Calls[0]
		if code := c.input(cid, tid, map[string]any{"answers": map[string]any{fc.CallID: map[string]any{"reason": "school", "count": 3}}}); code != http.StatusAccepted {
			t.Fatalf("answer = %d", code)
		}
		v = c.wait(cid, tid)
		if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, "ordered 3 pens because school") {
			t.Fatalf("turn after the answer = %s %q", v.Status, v.Reply)
		}
	})

	t.Run("list_changed", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		_, c := stack(t, nil, withServer(srv))
		if _, ok := catalogSkills(c)["go_echo"]; !ok {
			t.Fatal("catalog lacks go_echo")
		}
		// The stack's watch session may still be opening: add tools until
		// one shows (each add notifies the sessions open by then).
		// Each tool is given up to 2s to show before the next is added;
		// the whole wait has a generous deadline (issue 31: 50 tries of
		// 200 ms ran out on a loaded machine's slow session start).
		deadline := time.Now().Add(90 * time.Second)
	tools:
		for i := 0; ; i++ {
			if time.Now().After(deadline) {
				t.Fatal("the catalog never showed a tool added after start (tools/list_changed) within 90s")
			}
			srv.AddTool(fmt.Sprintf("new%d", i), "A new tool.")
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if _, ok := catalogSkills(c)[fmt.Sprintf("go_new%d", i)]; ok {
					break tools
				}
			}
		}
	})

	t.Run("server down mid-turn", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		m := oneCall("go_hang", map[string]any{})
		_, c := stack(t, m, withServer(srv))
		before := catalogSkills(c)
		cid := c.newConversation()
		tid := c.send(cid, "hang")
		select {
		case <-srv.Hanging():
		case <-time.After(20 * time.Second):
			t.Fatal("the hang call never reached the server")
		}
		srv.Down()
		v := c.wait(cid, tid)
		if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, `"status":"failed"`) {
			t.Fatalf("turn = %s %q, want the model told the call failed", v.Status, v.Reply)
		}
		after := catalogSkills(c)
		if len(after) != len(before) {
			t.Errorf("catalog has %d skills after the server went down, want %d", len(after), len(before))
		}
		var conv map[string]any
		if code := c.do("GET", "/v1/conversations/"+cid, nil, &conv); code != http.StatusOK {
			t.Errorf("GET conversation = %d, want 200", code)
		}
	})

	t.Run("elicitation in a workflow step", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		dir := t.TempDir()
		wf := `{"id":"order_then_echo","name":"Order, then echo","description":"Orders an item, then echoes the order.",
			"inputs":[{"path":"item"}],
			"steps":[{"id":"order","skill":"go_order","arguments":{"item":"{{inputs.item}}"}},
			         {"id":"echo","skill":"go_echo","arguments":{"text":"{{steps.order.summary}}"}}]}`
		if err := os.WriteFile(filepath.Join(dir, "order_then_echo.json"), []byte(wf), 0o600); err != nil {
			t.Fatal(err)
		}
		m := oneCall(catalog.WorkflowToolName("order_then_echo"), map[string]any{"item": "pens"})
		_, c := stack(t, m, withServer(srv), func(cfg *Config) { cfg.WorkflowsDir = dir })
		cid := c.newConversation()
		tid := c.send(cid, "order pens, then echo it")
		v := c.wait(cid, tid)
		if v.Status != record.StatusAwaitingInput || v.Form == nil {
			t.Fatalf("turn = %s %q, want the order step's elicitation as a form", v.Status, v.Reply)
		}
		fc := v.Form.Calls[0]
		if code := c.input(cid, tid, map[string]any{"answers": map[string]any{fc.CallID: map[string]any{"reason": "school", "count": 3}}}); code != http.StatusAccepted {
			t.Fatalf("answer = %d", code)
		}
		v = c.wait(cid, tid)
		if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, "echo: ordered 3 pens because school") {
			t.Fatalf("turn after the answer = %s %q, want the answer to reach the order step and the echo to follow", v.Status, v.Reply)
		}
	})

	t.Run("workflow step", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.Start(t)
		dir := t.TempDir()
		wf := `{"id":"echo_twice","name":"Echo twice","description":"Echoes, then echoes the echo.",
			"inputs":[{"path":"text"}],
			"steps":[{"id":"one","skill":"go_echo","arguments":{"text":"{{inputs.text}}"}},
			         {"id":"two","skill":"go_echo","arguments":{"text":"{{steps.one.summary}}"}}]}`
		if err := os.WriteFile(filepath.Join(dir, "echo_twice.json"), []byte(wf), 0o600); err != nil {
			t.Fatal(err)
		}
		m := oneCall(catalog.WorkflowToolName("echo_twice"), map[string]any{"text": "hi"})
		_, c := stack(t, m, withServer(srv), func(cfg *Config) { cfg.WorkflowsDir = dir })
		cid := c.newConversation()
		v := c.wait(cid, c.send(cid, "echo twice"))
		if v.Status != record.StatusSucceeded || !strings.Contains(v.Reply, "echo: echo: hi") || srv.Calls("echo") != 2 {
			t.Fatalf("turn = %s %q (echo ran %d), want both steps", v.Status, v.Reply, srv.Calls("echo"))
		}
	})
}
