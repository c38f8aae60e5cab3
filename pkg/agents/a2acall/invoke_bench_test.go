package a2acall

import (
	"log/slog"
	"testing"

	"github.com/clientagent/clientagent/pkg/tool"
)

// BenchmarkInvokeMessage is one call to a specialist that answers at
// once with a message: the A2A round trip on loopback, both sides in this
// process, as the local stack's demo agents are.
func BenchmarkInvokeMessage(b *testing.B) {
	srv, _ := newA2AServer(b)
	inv := NewInvoker(InvokerOptions{Artifacts: newMemStore(b), NewID: seqIDs(), Logger: slog.New(slog.DiscardHandler)})
	c := tool.Call{ConversationID: "c1", TurnID: "t1", CallID: "call_1", Capability: testCapability(srv.URL + "/rpc"),
		Arguments: map[string]any{"mode": "message"}, Sources: map[string]string{"mode": "model"}}
	b.ReportAllocs()
	for b.Loop() {
		if out := inv.Invoke(b.Context(), c); out.Result.Status != "succeeded" {
			b.Fatalf("Invoke = %+v, want succeeded", out.Result)
		}
	}
}
