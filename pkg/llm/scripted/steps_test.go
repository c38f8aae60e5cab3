package scripted

// A provider of a fixed list of steps, which only this package's tests use.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/clientagent/clientagent/pkg/llm"
)

// ErrExhausted is returned (wrapped) when a New provider is called more
// often than it has steps.
var ErrExhausted = errors.New("scripted: no steps left")

// Step is one scripted answer: Response, or Err when set.
type Step struct {
	Response *llm.Response
	Err      error
}

// Text is a step answering with final text.
func Text(text string) Step { return Step{Response: &llm.Response{Text: text}} }

// Calls is a step answering with tool calls in one assistant message. Calls
// without an ID get a deterministic one.
func Calls(calls ...llm.ToolCall) Step {
	return Step{Response: &llm.Response{ToolCalls: calls}}
}

// Call is a tool call with name and raw JSON arguments, for Calls.
func Call(name, arguments string) llm.ToolCall {
	return llm.ToolCall{Name: name, Arguments: arguments}
}

// Fail is a step answering with err.
func Fail(err error) Step { return Step{Err: err} }

// New returns a provider answering the n-th call with steps[n]; calls past
// the end fail with ErrExhausted.
func New(steps ...Step) *Provider {
	var mu sync.Mutex
	next := 0
	return Func(func(llm.Request) (*llm.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(steps) {
			return nil, fmt.Errorf("call %d of %d: %w", next+1, len(steps), ErrExhausted)
		}
		s := steps[next]
		next++
		if s.Err != nil {
			return nil, s.Err
		}
		if s.Response == nil {
			return nil, fmt.Errorf("scripted: step %d has neither response nor error", next)
		}
		return s.Response, nil
	})
}
