package a2aserver_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
)

// a2aClient is an a2a-go client of the stack's A2A endpoint as user.
func a2aClient(t *testing.T, base, token string) *a2aclient.Client {
	t.Helper()
	u, _ := url.Parse(base)
	hc := &http.Client{Transport: bearerTransport{host: u.Host, token: token}}
	c, err := a2aclient.NewFromEndpoints(t.Context(), []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: base + "/a2a"}},
		a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// A contextId the caller chose is one conversation of that caller: the
// same id from another principal is another conversation, and one
// principal's task is not found for another.
func TestContextsPerPrincipal(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	alice, _ := st.Token("alice")
	bob, _ := st.Token("bob")
	ca, cb := a2aClient(t, st.URL(), alice), a2aClient(t, st.URL(), bob)

	send := func(c *a2aclient.Client, text string) *a2a.Task {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
		msg.ContextID = "shared-context"
		res, err := c.SendMessage(t.Context(), &a2a.MessageSendParams{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage(%q) error = %v", text, err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.ContextID != "shared-context" || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SendMessage(%q) = %+v, want a completed task in context shared-context", text, res)
		}
		return task
	}
	a1 := send(ca, "Create an SVG with the word One")
	a2 := send(ca, "Create an SVG with the word Two")
	b1 := send(cb, "Create an SVG with the word Three")
	if a1.Metadata["conversation_id"] != a2.Metadata["conversation_id"] {
		t.Errorf("alice's two messages in one context went to conversations %v and %v", a1.Metadata["conversation_id"], a2.Metadata["conversation_id"])
	}
	if b1.Metadata["conversation_id"] == a1.Metadata["conversation_id"] {
		t.Errorf("bob's message with alice's contextId went to alice's conversation %v", a1.Metadata["conversation_id"])
	}
	if _, err := cb.GetTask(t.Context(), &a2a.TaskQueryParams{ID: a1.ID}); err == nil || errors.Is(err, a2a.ErrInternalError) {
		t.Errorf("bob GetTask(alice's task) error = %v, want task not found", err)
	}
	if _, err := cb.CancelTask(t.Context(), &a2a.TaskIDParams{ID: a1.ID}); err == nil {
		t.Error("bob CancelTask(alice's task) succeeded, want task not found")
	}
	got, err := ca.GetTask(t.Context(), &a2a.TaskQueryParams{ID: a1.ID})
	if err != nil || got.ContextID != "shared-context" || len(got.Artifacts) != 1 {
		t.Errorf("alice GetTask(own task) = %+v, %v; want it in context shared-context with its SVG", got, err)
	}

	// A task waiting for its form is cancelled like the turn.
	res, err := ca.SendMessage(t.Context(), &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "Design a valve flange with 4 holes"})})
	if err != nil {
		t.Fatal(err)
	}
	waiting := res.(*a2a.Task)
	if waiting.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("flange task = %+v, want input-required", waiting.Status)
	}
	cancelled, err := ca.CancelTask(t.Context(), &a2a.TaskIDParams{ID: waiting.ID})
	if err != nil || cancelled.Status.State != a2a.TaskStateCanceled || cancelled.Metadata["status"] != "cancelled" {
		t.Errorf("CancelTask(waiting task) = %+v, %v; want canceled (turn cancelled)", cancelled, err)
	}
}
