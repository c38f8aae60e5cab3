package a2acall

import (
	"net"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2agrpc"
	"github.com/a2aproject/a2a-go/a2asrv"
	"google.golang.org/grpc"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// A specialist whose card offers only gRPC is reached over gRPC: a task
// with data and an input-required round trip on the same task work as
// over JSON-RPC (a2a-go's gRPC server, in process).
func TestInvokeOverGRPC(t *testing.T) {
	t.Parallel()
	exec := &testExecutor{release: make(chan struct{})}
	t.Cleanup(func() { close(exec.release) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	a2agrpc.NewHandler(a2asrv.NewHandler(exec)).RegisterWith(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	card := &a2a.AgentCard{Name: "Painter", URL: "http://" + lis.Addr().String(), PreferredTransport: a2a.TransportProtocolGRPC,
		Skills: []a2a.AgentSkill{{ID: "paint", Name: "paint", Description: "Paints."}}}
	caps := agents.CapabilitiesFromCard(card, "http://127.0.0.1:1")
	if len(caps) != 1 || caps[0].Transport != "GRPC" || caps[0].AgentURL != card.URL {
		t.Fatalf("agents.CapabilitiesFromCard() = %+v, want the gRPC interface", caps)
	}
	// The test agent reads a data part: a schema skill (a card without our
	// extension would make it plain text).
	caps[0].Plain = false
	inv := NewInvoker(InvokerOptions{})

	out := inv.Invoke(t.Context(), tool.Call{CallID: "g1", Capability: caps[0], Arguments: map[string]any{"mode": "message"}})
	if out.Result.Status != record.ResultSucceeded || out.Result.Summary != "direct answer" || out.Result.Result != `{"n":1}` {
		t.Fatalf("Invoke(message over gRPC) = %+v, want succeeded with text and data", out.Result)
	}

	first := inv.Invoke(t.Context(), tool.Call{CallID: "g2", Capability: caps[0], Arguments: map[string]any{"mode": "ask"}})
	if first.InputRequired == nil || first.InputRequired.Message != "Which color?" {
		t.Fatalf("Invoke(ask over gRPC) = %+v, want input required", first)
	}
	task := first.InputRequired.Task
	done := inv.Invoke(t.Context(), tool.Call{CallID: "g2", Capability: caps[0], Continue: &task,
		Arguments: map[string]any{"mode": "ask", "color": "blue"}, Sources: map[string]string{"mode": "model", "color": "user"}})
	if done.Result.Status != record.ResultSucceeded || done.Result.Summary != "Painted it blue." {
		t.Errorf("Invoke(answer over gRPC) = %+v, want Painted it blue.", done.Result)
	}

	failed := inv.Invoke(t.Context(), tool.Call{CallID: "g3", Capability: caps[0], Arguments: map[string]any{"mode": "fail"}})
	if failed.Result.Status != record.ResultFailed || failed.Result.Error == "" {
		t.Errorf("Invoke(fail over gRPC) = %+v, want failed with the agent's text", failed.Result)
	}
}
