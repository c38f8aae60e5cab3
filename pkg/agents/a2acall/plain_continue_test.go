package a2acall

import (
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// docs/design.md §5: a plain agent that asked a question (input-required) gets the
// user's answer as the text of the continuation, on the same task.
func TestPlainContinuationSendsTheAnswer(t *testing.T) {
	t.Parallel()
	inv := NewInvoker(InvokerOptions{})
	tests := []struct {
		name    string
		args    map[string]any
		sources map[string]string
		want    string
	}{
		{"one answer", map[string]any{"input": "paint the fence", "answer": "red"}, map[string]string{"input": "model", "answer": "user"}, "red"},
		{"several", map[string]any{"input": "x", "color": "red", "coats": 2.0}, map[string]string{"input": "model", "color": "user", "coats": "user"}, "coats: 2\ncolor: red"},
		{"no user value", map[string]any{"input": "again"}, map[string]string{"input": "model"}, "again"},
	}
	for _, tc := range tests {
		msg, err := inv.message(t.Context(), tool.Call{CallID: "c1", Capability: catalog.Capability{Plain: true},
			Arguments: tc.args, Sources: tc.sources, Continue: &record.A2ATask{TaskID: "t1", ContextID: "x1"}})
		if err != nil {
			t.Fatal(err)
		}
		text := msg.Parts[0].(a2a.TextPart).Text
		if text != tc.want || string(msg.TaskID) != "t1" || msg.ContextID != "x1" {
			t.Errorf("%s: message() = %q on task %s/%s, want %q on t1/x1", tc.name, text, msg.TaskID, msg.ContextID, tc.want)
		}
	}
}
