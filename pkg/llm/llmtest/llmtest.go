// Package llmtest holds test helpers for code that takes an llm.Provider.
// Only tests import it.
package llmtest

import (
	"context"

	"github.com/clientagent/clientagent/pkg/llm"
)

// ProviderFunc adapts a function to llm.Provider.
type ProviderFunc func(ctx context.Context, req llm.Request) (*llm.Response, error)

// Complete calls f.
func (f ProviderFunc) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return f(ctx, req)
}
