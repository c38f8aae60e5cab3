package demoagents

import (
	"bytes"
	"encoding/json"
	"errors"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/google/go-cmp/cmp"
)

// The fast agents show the demo agents' cards unchanged (same URLs, skill
// ids, schemas and extension), so a stack that swaps them in offers the
// model the same tools.
func TestFastCardsAreTheDemoCards(t *testing.T) {
	t.Parallel()
	demo := newStack(t)
	fast := httptest.NewServer(nil)
	t.Cleanup(fast.Close)
	fast.Config.Handler = FastHandler(fast.URL)
	for _, path := range agentPaths {
		want, err := agentcard.DefaultResolver.Resolve(t.Context(), demo.agents.URL+path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := agentcard.DefaultResolver.Resolve(t.Context(), fast.URL+path)
		if err != nil {
			t.Fatal(err)
		}
		want.URL = fast.URL + path
		if diff := cmp.Diff(cardJSON(t, want), cardJSON(t, got)); diff != "" {
			t.Errorf("fast card %s differs from the demo card (-demo +fast):\n%s", path, diff)
		}
	}
}

func cardJSON(t *testing.T, c *a2a.AgentCard) map[string]any {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The Popelnase chain on the fast agents: each call completes at once with
// one tiny artifact named as the demo's, the PNG without fetching its
// input (the file URI here answers 404), and bad arguments still fail.
func TestFastPopelnase(t *testing.T) {
	t.Parallel()
	var fetched int
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	fast := FastHandler(srv.URL)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/files/a1" {
			fetched++
			http.NotFound(w, r)
			return
		}
		fast.ServeHTTP(w, r)
	})
	s := &stack{agents: srv}

	task := send(t, s.client(t, PathSVG), "call_1", map[string]any{"word": "Popelnase"})
	wantState(t, task, a2a.TaskStateCompleted)
	files := taskFiles(t, task)
	if len(files) != 1 || files[0].name != "Popelnase.svg" || files[0].mime != "image/svg+xml" || len(files[0].data) > 200 {
		t.Fatalf("create_svg_artifact files = %+v, want one tiny Popelnase.svg", files)
	}

	in := a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: "Popelnase.svg", MimeType: "image/svg+xml"}, URI: srv.URL + "/files/a1"},
		Metadata: map[string]any{"artifact_id": "a1"}}
	task = send(t, s.client(t, PathPNG), "call_2", map[string]any{"artifact_id": "a1"}, in)
	wantState(t, task, a2a.TaskStateCompleted)
	files = taskFiles(t, task)
	if len(files) != 1 || files[0].name != "Popelnase.png" || files[0].mime != "image/png" {
		t.Fatalf("convert_svg_to_png files = %+v, want one Popelnase.png", files)
	}
	if _, err := png.Decode(bytes.NewReader(files[0].data)); err != nil {
		t.Errorf("the PNG does not decode: %v", err)
	}
	if fetched != 0 {
		t.Errorf("the input file was fetched %d times, want 0", fetched)
	}

	task = send(t, s.client(t, PathSVG), "call_3", map[string]any{"word": "x", "size": 3})
	wantState(t, task, a2a.TaskStateFailed)
}

// A fast agent answers in the request and keeps nothing: message/stream
// is the finished task as its one event, each task is new (its id, the
// caller's context kept, the message in its history), and a task can be
// neither continued, read nor cancelled afterwards.
func TestFastAgentAnswersInTheRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Config.Handler = FastHandler(srv.URL)
	c := (&stack{agents: srv}).client(t, PathSVG)
	ctx := t.Context()

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"word": "Popelnase"}})
	msg.ContextID = "ctx-1"
	var events []a2a.Event
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		if err != nil {
			t.Fatalf("SendStreamingMessage() error = %v", err)
		}
		events = append(events, ev)
	}
	if len(events) != 1 {
		t.Fatalf("stream = %d events, want the finished task alone", len(events))
	}
	task, ok := events[0].(*a2a.Task)
	if !ok {
		t.Fatalf("stream event = %T, want *a2a.Task", events[0])
	}
	wantState(t, task, a2a.TaskStateCompleted)
	if task.ContextID != "ctx-1" || len(task.History) != 1 || task.History[0].ID != msg.ID || len(taskFiles(t, task)) != 1 {
		t.Errorf("task = context %q, history %d, want context ctx-1, the message in its history and one file", task.ContextID, len(task.History))
	}
	again := send(t, c, "call_2", map[string]any{"word": "Popelnase"})
	if again.ID == task.ID || again.ContextID == "" {
		t.Errorf("second task id %q (first %q), context %q: want a new task in a new context", again.ID, task.ID, again.ContextID)
	}

	next := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.DataPart{Data: map[string]any{"word": "x"}})
	if _, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: next}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("continuing a task: error = %v, want task not found", err)
	}
	if _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask() error = %v, want task not found", err)
	}
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("CancelTask() error = %v, want task not found", err)
	}
}

// BenchmarkFastAgentCall is one create_svg_artifact call over loopback
// A2A JSON-RPC (a2aclient to FastHandler): the specialist's share of a
// load run's tool step (docs/benchmarks.md).
func BenchmarkFastAgentCall(b *testing.B) {
	srv := httptest.NewServer(nil)
	b.Cleanup(srv.Close)
	srv.Config.Handler = FastHandler(srv.URL)
	card, err := agentcard.DefaultResolver.Resolve(b.Context(), srv.URL+PathSVG)
	if err != nil {
		b.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(b.Context(), card)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"word": "Popelnase"}})
		res, err := c.SendMessage(b.Context(), &a2a.MessageSendParams{Message: msg})
		if err != nil {
			b.Fatal(err)
		}
		if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
			b.Fatalf("answer = %#v, want a completed task", res)
		}
	}
}
