package a2acall

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// startJSAgent runs testdata/interop/server.mjs (official @a2a-js/sdk) on a
// free loopback port and returns its base URL. It skips when node or the
// SDK is not installed.
func startJSAgent(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("interop test needs node on PATH (and `npm install` in the repository root for @a2a-js/sdk)")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		t.Skipf("interop test needs node_modules/@a2a-js/sdk in %s: run `npm install` there", root)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "interop", "server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // the server exits when stdin closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node interop server: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatal("node interop server did not report its port within 30s")
		return ""
	}
}

// TestInteropJSSDK checks registry and invoker against an A2A server on the
// official JS SDK: card → capabilities (plain skill and schema extension),
// a plain call, and the input-required round trip on one task (docs/design.md §5).
func TestInteropJSSDK(t *testing.T) {
	t.Parallel()
	base := startJSAgent(t)
	_, rdb := valkeytest.Embedded(t)

	// Registered as CLIENTAGENT_AGENTS would list it.
	reg := agents.NewRegistry(agents.RegistryOptions{URLs: agents.ParseAgentList(" " + base + "/ ,"), Redis: rdb, FetchTimeout: 10 * time.Second})
	caps, err := reg.Capabilities(t.Context())
	if err != nil {
		t.Fatalf("Capabilities() error = %v", err)
	}
	byTool := map[string]catalog.Capability{}
	for _, c := range caps {
		byTool[c.Tool] = c
	}
	upper, ok := byTool["text_uppercase"]
	if !ok || !upper.Plain || upper.SkillID != "text.uppercase" || upper.AgentURL != base+"/a2a/jsonrpc" {
		t.Fatalf("capability text_uppercase = %+v (found %v), want plain skill text.uppercase at %s/a2a/jsonrpc; all: %v", upper, ok, base, caps)
	}
	pizza, ok := byTool["order_pizza"]
	if !ok || pizza.Plain || pizza.UsageNotes == "" || !json.Valid(pizza.InputSchema) {
		t.Fatalf("capability order_pizza = %+v (found %v), want schema skill with usage notes", pizza, ok)
	}

	store := newMemStore(t)
	inv := NewInvoker(InvokerOptions{Artifacts: store, Timeout: 30 * time.Second, NewID: seqIDs()})

	out := inv.Invoke(t.Context(), tool.Call{ConversationID: "c", TurnID: "t", CallID: "call_up", Capability: upper,
		Arguments: map[string]any{"input": "hello from go"}, Sources: map[string]string{"input": "model"}})
	if out.Result.Status != record.ResultSucceeded || out.Result.Summary != "HELLO FROM GO" {
		t.Errorf("Invoke(text_uppercase) = %+v, want succeeded HELLO FROM GO", out.Result)
	}

	call := tool.Call{ConversationID: "c", TurnID: "t", CallID: "call_pizza", Capability: pizza,
		Arguments: map[string]any{"item": "margherita"}, Sources: map[string]string{"item": "model"}}
	out = inv.Invoke(t.Context(), call)
	if out.InputRequired == nil {
		t.Fatalf("Invoke(order_pizza) InputRequired = nil, outcome %+v", out)
	}
	wantFields := []catalog.FormField{{Name: "size", Type: "string", Description: "Pizza size", Required: true, Enum: []string{"small", "large"}}}
	if diff := cmp.Diff(wantFields, out.InputRequired.Fields); diff != "" {
		t.Errorf("InputRequired.Fields mismatch (-want +got):\n%s", diff)
	}
	if out.InputRequired.Message != "What size should the margherita be?" {
		t.Errorf("InputRequired.Message = %q", out.InputRequired.Message)
	}

	task := out.InputRequired.Task
	call.Continue = &task
	call.Arguments = map[string]any{"item": "margherita", "size": "large"}
	call.Sources = map[string]string{"item": "model", "size": "user"}
	out = inv.Invoke(t.Context(), call)
	if out.Result.Status != record.ResultSucceeded || out.Result.Summary != "Ordered a large margherita." {
		t.Fatalf("continued Invoke(order_pizza) = %+v, want succeeded", out.Result)
	}
	var result map[string]any
	if err := json.Unmarshal([]byte(out.Result.Result), &result); err != nil {
		t.Fatalf("Result.Result = %q: %v", out.Result.Result, err)
	}
	if result["sameTask"] != true {
		t.Errorf("agent saw sameTask = %v, want true (continuation must reuse task %s)", result["sameTask"], task.TaskID)
	}
	if diff := cmp.Diff(map[string]any{"item": "model", "size": "user"}, result["inputSources"]); diff != "" {
		t.Errorf("inputSources the agent received mismatch (-want +got):\n%s", diff)
	}
	if len(out.Artifacts) != 1 || out.Artifacts[0].Name != "receipt.txt" || out.Artifacts[0].Description != "Order receipt" {
		t.Fatalf("Artifacts = %+v, want receipt.txt", out.Artifacts)
	}
	if f, ok := store.file("c", out.Artifacts[0].ID); !ok || string(f.body) != "large margherita\n" {
		t.Errorf("stored receipt = %q (found %v), want %q", f.body, ok, "large margherita\n")
	}

	// Continuing a completed task: the JS SDK answers a JSON-RPC error,
	// whose message must reach the model (a2a-go alone drops it).
	out = inv.Invoke(t.Context(), call)
	if out.Result.Status != record.ResultFailed || !strings.Contains(out.Result.Error, "terminal state") {
		t.Errorf("Invoke(continue completed task) = %+v, want failed mentioning the terminal state", out.Result)
	}
}
