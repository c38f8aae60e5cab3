package mcp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/artifact/localstore"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/mcp/mcptest"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey/embedded"
	"github.com/clientagent/clientagent/pkg/tool"
)

// setup starts the go-sdk test server and returns a source and an invoker of it.
func setup(t *testing.T) (*mcptest.Server, *mcp.Source, *mcp.Invoker, *localstore.Store) {
	t.Helper()
	srv := mcptest.Start(t)
	rdb, closeRDB, err := embedded.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeRDB)
	arts, err := localstore.New(t.TempDir(), "http://127.0.0.1:1", []byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	servers := []mcp.ServerConfig{{Name: "go", URL: srv.URL}}
	src := mcp.NewSource(mcp.SourceOptions{Servers: servers, Redis: rdb})
	inv := mcp.NewInvoker(mcp.InvokerOptions{Servers: servers, Artifacts: arts, Timeout: 10 * time.Second})
	return srv, src, inv, arts
}

func capsByTool(t *testing.T, src *mcp.Source) map[string]catalog.Capability {
	t.Helper()
	caps, err := src.Capabilities(t.Context())
	if err != nil {
		t.Fatalf("Capabilities() error = %v", err)
	}
	out := map[string]catalog.Capability{}
	for _, c := range caps {
		out[c.Tool] = c
	}
	return out
}

func TestToolsAreCapabilities(t *testing.T) {
	t.Parallel()
	_, src, _, _ := setup(t)
	caps := capsByTool(t, src)
	var names []string
	for n := range caps {
		names = append(names, n)
	}
	for _, want := range []string{"go_echo", "go_fail", "go_image", "go_delete_file", "go_order", "go_hang"} {
		if _, ok := caps[want]; !ok {
			t.Errorf("Capabilities() = %v, want %s", names, want)
		}
	}
	if !caps["go_delete_file"].RequiresApproval || caps["go_echo"].RequiresApproval {
		t.Errorf("RequiresApproval: delete_file %v, echo %v; want true, false", caps["go_delete_file"].RequiresApproval, caps["go_echo"].RequiresApproval)
	}
	if got := caps["go_echo"].Description; got != "Echo: Answers the text back." {
		t.Errorf("echo description = %q", got)
	}
	// The catalog takes them like any skill: plain JSON Schema, validation.
	cat := catalog.New(src2caps(caps), nil)
	e, ok := cat.Lookup("go_echo")
	if !ok {
		t.Fatal("catalog has no go_echo")
	}
	if err := e.Validate(map[string]any{"text": 3}); err == nil {
		t.Error("Validate(text: 3) = nil, want a schema violation")
	}
	if err := e.Validate(map[string]any{"text": "hi"}); err != nil {
		t.Errorf("Validate(text: hi) = %v", err)
	}
}

func src2caps(m map[string]catalog.Capability) []catalog.Capability {
	var out []catalog.Capability
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

func call(caps map[string]catalog.Capability, name string, args map[string]any) tool.Call {
	return tool.Call{ConversationID: "c1", TurnID: "t1", CallID: "call_t1_0", Capability: caps[name], Arguments: args}
}

func TestInvokeResults(t *testing.T) {
	t.Parallel()
	srv, src, inv, arts := setup(t)
	caps := capsByTool(t, src)

	o := inv.Invoke(t.Context(), call(caps, "go_echo", map[string]any{"text": "hello"}))
	want := record.ToolResult{Status: record.ResultSucceeded, Summary: "echo: hello", Result: `{"echoed":"hello","length":5}`}
	if diff := cmp.Diff(want, o.Result); diff != "" {
		t.Errorf("Invoke(echo) result mismatch (-want +got):\n%s", diff)
	}

	o = inv.Invoke(t.Context(), call(caps, "go_fail", nil))
	if o.Result.Status != record.ResultFailed || o.Result.Error != "the widget is broken" {
		t.Errorf("Invoke(fail) = %+v, want failed with the tool's text", o.Result)
	}

	o = inv.Invoke(t.Context(), call(caps, "go_image", nil))
	if o.Result.Status != record.ResultSucceeded || len(o.Artifacts) != 1 || len(o.Result.Artifacts) != 1 {
		t.Fatalf("Invoke(image) = %+v, want one artifact", o)
	}
	a := o.Artifacts[0]
	if a.MimeType != "image/png" || a.Name != "go_image-1.png" || a.CallID != "call_t1_0" {
		t.Errorf("image artifact = %+v", a)
	}
	rc, _, err := arts.Get(t.Context(), "c1", a.ID)
	if err != nil {
		t.Fatalf("artifact %s not stored: %v", a.ID, err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, mcptest.PNG) {
		t.Error("stored image differs from the tool's")
	}
	if srv.Calls("echo") != 1 {
		t.Errorf("echo ran %d times, want 1", srv.Calls("echo"))
	}
}

// The elicitation path: the first attempt pauses with the form, the
// answer re-runs the call and answers the server's elicitation.
func TestElicitationPausesAndTheAnswerCompletes(t *testing.T) {
	t.Parallel()
	_, src, inv, _ := setup(t)
	caps := capsByTool(t, src)

	c := call(caps, "go_order", map[string]any{"item": "pens"})
	c.Sources = map[string]string{"item": "model"}
	o := inv.Invoke(t.Context(), c)
	if o.InputRequired == nil {
		t.Fatalf("Invoke(order) = %+v, want input required", o.Result)
	}
	ir := o.InputRequired
	if ir.Message != "Why do you need pens?" || ir.Task.TaskID != "mcp-elicitation-1" {
		t.Errorf("InputRequired = %+v", ir)
	}
	wantFields := []catalog.FormField{
		{Name: "count", Type: "integer", Description: "How many"},
		{Name: "answer_item", Type: "string", Description: "Another item to add"},
		{Name: "reason", Type: "string", Description: "Reason. Why you need it", Required: true},
	}
	if diff := cmp.Diff(wantFields, ir.Fields); diff != "" {
		t.Errorf("form fields mismatch (-want +got):\n%s", diff)
	}

	// What batch.ApplyAnswers does with the user's answer.
	c.Arguments = map[string]any{"item": "pens", "reason": "school", "count": 3, "answer_item": "paper"}
	c.Sources = map[string]string{"item": "model", "reason": "user", "count": "user", "answer_item": "user"}
	task := ir.Task
	c.Continue = &task
	o = inv.Invoke(t.Context(), c)
	if o.InputRequired != nil || o.Result.Status != record.ResultSucceeded {
		t.Fatalf("Invoke(order, answered) = %+v %+v, want succeeded", o.Result, o.InputRequired)
	}
	if want := "ordered 3 pens because school (also paper)"; o.Result.Summary != want {
		t.Errorf("Summary = %q, want %q", o.Result.Summary, want)
	}
}

func TestServerDown(t *testing.T) {
	t.Parallel()
	srv, src, inv, _ := setup(t)
	caps := capsByTool(t, src)

	done := make(chan record.CallOutcome)
	go func() { done <- inv.Invoke(context.Background(), call(caps, "go_hang", nil)) }()
	select {
	case <-srv.Hanging():
	case <-time.After(10 * time.Second):
		t.Fatal("hang never started")
	}
	srv.Down()
	var o record.CallOutcome
	select {
	case o = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not end when its server went down")
	}
	if o.Result.Status != record.ResultFailed || !strings.Contains(o.Result.Error, "go") {
		t.Errorf("Invoke(hang) with the server down = %+v, want failed naming the server", o.Result)
	}

	if err := src.Refresh(t.Context()); err == nil {
		t.Error("Refresh() with the server down = nil, want an error")
	}
	after := capsByTool(t, src)
	if len(after) != len(caps) {
		t.Fatalf("catalog with the server down has %d tools, want the last good %d", len(after), len(caps))
	}
	for n, c := range after {
		if !c.Unavailable {
			t.Errorf("%s is not marked unavailable", n)
		}
	}
	o = inv.Invoke(t.Context(), call(caps, "go_echo", map[string]any{"text": "x"}))
	if o.Result.Status != record.ResultFailed || !strings.Contains(o.Result.Error, "unreachable") {
		t.Errorf("Invoke(echo) on a down server = %+v, want failed unreachable", o.Result)
	}
}

func TestListChangedRefreshes(t *testing.T) {
	t.Parallel()
	srv, src, _, _ := setup(t)
	_ = capsByTool(t, src) // cached now, fresh for the TTL
	changed := make(chan struct{}, 10)
	stop := src.Watch(func() { changed <- struct{}{} })
	t.Cleanup(stop)
	// The watch session needs a moment to open before the change.
	deadline := time.Now().Add(60 * time.Second)
	for {
		srv.AddTool("shout", "Shouts.")
		select {
		case <-changed:
		case <-time.After(300 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no refresh after tools/list_changed")
			}
			srv.MCP.RemoveTools("shout")
			continue
		}
		break
	}
	if _, ok := capsByTool(t, src)["go_shout"]; !ok {
		t.Error("catalog lacks go_shout after tools/list_changed")
	}
}

// failingSecrets answers every read as Secrets Manager does without AWS
// credentials.
type failingSecrets struct{}

func (failingSecrets) SecretString(context.Context, string) (string, error) {
	return "", errors.New("no EC2 IMDS role found")
}

// Issue 28: a server whose secret header cannot be read does not stop the
// others. It is kept with its error: its tools are left out (never listed)
// or, once listed, marked unavailable, and a call of them fails naming
// why; the other server's tools are listed as usual.
func TestUnconfigurableServerIsDown(t *testing.T) {
	t.Parallel()
	srv := mcptest.Start(t)
	rdb, closeRDB, err := embedded.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeRDB)
	servers := mcp.ResolveEach(t.Context(), []mcp.ServerConfig{
		{Name: "go", URL: srv.URL},
		{Name: "docs", URL: srv.URL, Headers: map[string]string{"Authorization": "secret:docs-mcp-token"}},
	}, failingSecrets{})
	if servers[0].Unusable != nil {
		t.Fatalf("the server without secrets has Unusable %v", servers[0].Unusable)
	}
	if err := servers[1].Unusable; err == nil || !strings.Contains(err.Error(), "docs-mcp-token") {
		t.Fatalf("the server with an unreadable secret has Unusable %v, want one naming the secret", err)
	}
	if len(servers[1].Headers) != 0 {
		t.Errorf("the unconfigured server keeps headers %v", servers[1].Headers)
	}
	src := mcp.NewSource(mcp.SourceOptions{Servers: servers, Redis: rdb})
	caps := capsByTool(t, src)
	if _, ok := caps["go_echo"]; !ok {
		t.Fatalf("catalog %v lacks the configured server's go_echo", slices.Collect(maps.Keys(caps)))
	}
	for n, c := range caps {
		if c.MCPServer == "docs" {
			t.Errorf("a tool of the unconfigured server is listed: %s", n)
		}
	}
	stop := src.Watch(nil) // keeps no session for it, and returns at once
	stop()

	arts, err := localstore.New(t.TempDir(), "http://127.0.0.1:1", []byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	inv := mcp.NewInvoker(mcp.InvokerOptions{Servers: servers, Artifacts: arts, Timeout: 10 * time.Second})
	c := call(caps, "go_echo", map[string]any{"text": "x"})
	c.Capability.MCPServer, c.Capability.Tool = "docs", "docs_echo"
	if o := inv.Invoke(t.Context(), c); o.Result.Status != record.ResultFailed || !strings.Contains(o.Result.Error, "not configured") {
		t.Errorf("Invoke on the unconfigured server = %+v, want failed: not configured", o.Result)
	}
}
