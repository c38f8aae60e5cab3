package scripted_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

func userRequest(text string) llm.Request {
	return llm.Request{System: "sys", Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}
}

func TestNewAnswersStepsInOrder(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	p := scripted.New(
		scripted.Calls(scripted.Call("create_svg_artifact", `{"word":"A"}`), llm.ToolCall{ID: "mine", Name: "x", Arguments: "{}"}),
		scripted.Fail(boom),
		scripted.Text("done"),
	)
	ctx := t.Context()

	r1, err := p.Complete(ctx, userRequest("one"))
	if err != nil {
		t.Fatalf("Complete() #1 error = %v", err)
	}
	if len(r1.ToolCalls) != 2 || !strings.HasPrefix(r1.ToolCalls[0].ID, "call_") || r1.ToolCalls[1].ID != "mine" {
		t.Errorf("Complete() #1 calls = %+v, want a generated call_ id and the given id kept", r1.ToolCalls)
	}
	if r1.Usage.InputTokens == 0 || r1.Usage.OutputTokens == 0 {
		t.Errorf("Complete() #1 usage = %+v, want an estimate", r1.Usage)
	}
	if _, err := p.Complete(ctx, userRequest("two")); !errors.Is(err, boom) {
		t.Errorf("Complete() #2 error = %v, want %v", err, boom)
	}
	r3, err := p.Complete(ctx, userRequest("three"))
	if err != nil || r3.Text != "done" {
		t.Errorf("Complete() #3 = %+v, %v, want text done", r3, err)
	}
	if _, err := p.Complete(ctx, userRequest("four")); !errors.Is(err, scripted.ErrExhausted) {
		t.Errorf("Complete() #4 error = %v, want ErrExhausted", err)
	}
	var texts []string
	for _, r := range p.Requests() {
		texts = append(texts, r.Messages[0].Content)
	}
	if diff := cmp.Diff([]string{"one", "two", "three", "four"}, texts); diff != "" {
		t.Errorf("Requests() mismatch (-want +got):\n%s", diff)
	}
}

func TestCallIDsDeterministicAndUnique(t *testing.T) {
	t.Parallel()
	answer := func(llm.Request) (*llm.Response, error) {
		return &llm.Response{ToolCalls: []llm.ToolCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: "{}"}}}, nil
	}
	p := scripted.Func(answer)
	a1, _ := p.Complete(t.Context(), userRequest("same"))
	a2, _ := p.Complete(t.Context(), userRequest("same"))
	b, _ := p.Complete(t.Context(), userRequest("other"))
	if a1.ToolCalls[0].ID != a2.ToolCalls[0].ID {
		t.Errorf("ids for the same transcript differ: %q vs %q", a1.ToolCalls[0].ID, a2.ToolCalls[0].ID)
	}
	if a1.ToolCalls[0].ID == a1.ToolCalls[1].ID {
		t.Errorf("ids within one message are equal: %q", a1.ToolCalls[0].ID)
	}
	if a1.ToolCalls[0].ID == b.ToolCalls[0].ID {
		t.Errorf("ids for different transcripts are equal: %q", b.ToolCalls[0].ID)
	}
}

func TestRequestsAreCopies(t *testing.T) {
	t.Parallel()
	p := scripted.New(scripted.Text("ok"))
	req := userRequest("original")
	if _, err := p.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	req.Messages[0].Content = "mutated by caller"
	if got := p.Requests()[0].Messages[0].Content; got != "original" {
		t.Errorf("Requests()[0] content = %q, want the request as it was sent", got)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	p := scripted.New(scripted.Text("ok"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Complete(ctx, userRequest("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Complete() error = %v, want context.Canceled", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	p := scripted.Func(func(llm.Request) (*llm.Response, error) { return &llm.Response{Text: "ok"}, nil })
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := p.Complete(t.Context(), userRequest("x")); err != nil {
				t.Errorf("Complete() error = %v", err)
			}
			_ = p.Requests()
		})
	}
	wg.Wait()
	if got := p.Calls(); got != 20 {
		t.Errorf("Calls() = %d, want 20", got)
	}
}

// Issue 15: the scripted model streams its text in chunks, in order, and
// the chunks joined are the answer's text.
func TestStreamsText(t *testing.T) {
	t.Parallel()
	const answer = "Here is the PNG image with the word Popelnase: popelnase.png."
	p := scripted.New(scripted.Text(answer)).Stream(time.Millisecond)
	var got []string
	req := userRequest("hi")
	req.OnText = func(d string) { got = append(got, d) }
	res, err := p.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 {
		t.Errorf("streamed %d chunks %q, want several", len(got), got)
	}
	if strings.Join(got, "") != answer || res.Text != answer {
		t.Errorf("chunks %q joined ≠ answer %q (response %q)", got, answer, res.Text)
	}
}
