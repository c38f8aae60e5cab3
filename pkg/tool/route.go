package tool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
)

// Kind is the kind of source that runs a capability's calls.
type Kind string

// The kinds of source. A workflow's tool runs its template's steps, each a
// call of a skill of another kind.
const (
	KindA2A      Kind = "a2a"      // a specialist agent (pkg/agents)
	KindMCP      Kind = "mcp"      // an MCP server's tool (pkg/mcp)
	KindWorkflow Kind = "workflow" // a workflow template (pkg/workflow)
)

// KindOf is the kind of source whose capability c is (a skill's: a
// workflow has no capability; Call.Kind tells its calls apart).
func KindOf(c catalog.Capability) Kind {
	if c.MCPServer != "" {
		return KindMCP
	}
	return KindA2A
}

// Router runs each call with the invoker of its capability's kind. A kind
// without one fails its calls: a process configured without MCP servers
// has no MCP invoker, and a stale catalog may still name their tools.
type Router map[Kind]Invoker

// Invoke runs c with the invoker of its kind.
func (r Router) Invoke(ctx context.Context, c Call) record.CallOutcome {
	k := c.Kind()
	if inv := r[k]; inv != nil {
		return inv.Invoke(ctx, c)
	}
	now := time.Now().UTC()
	return record.CallOutcome{CallID: c.CallID, Tool: c.Capability.Tool, StartedAt: now, EndedAt: now,
		Result: record.ToolResult{Status: record.ResultFailed, Error: fmt.Sprintf("no %s invoker is configured", k)}}
}

// DefaultCatalogTTL is how long Catalogs reuses a built catalog.
const DefaultCatalogTTL = 10 * time.Second

// Catalogs builds the tool catalog from every source's capabilities and
// the workflow templates, and reuses it for TTL, so a step does not
// recompile schemas it compiled a moment ago. It is safe for concurrent
// use.
type Catalogs struct {
	// Sources give the capabilities, in the order that decides which of
	// two equal tool names keeps the plain name.
	Sources   []Lister
	Workflows []catalog.Workflow
	// TTL is how long a built catalog is reused (default DefaultCatalogTTL).
	TTL time.Duration
	// Logger hears of the workflow templates that do not compile against
	// the skills whenever that set changes: one WARN naming the skills no
	// source offers, an ERROR for each template broken otherwise.
	Logger *slog.Logger

	mu       sync.Mutex
	built    *catalog.Catalog
	at       time.Time
	rejected string
}

// Invalidate drops the built catalog, so the next Catalog builds it again:
// a source's list changed (mcp.Source.Watch).
func (c *Catalogs) Invalidate() {
	c.mu.Lock()
	c.built = nil
	c.mu.Unlock()
}

// Catalog returns the current catalog. The error is a source's cache
// failing (record.ErrUnavailable), never a source being down.
func (c *Catalogs) Catalog(ctx context.Context) (*catalog.Catalog, error) {
	ttl := c.TTL
	if ttl == 0 {
		ttl = DefaultCatalogTTL
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.built != nil && time.Since(c.at) < ttl {
		return c.built, nil
	}
	var caps []catalog.Capability
	for _, s := range c.Sources {
		got, err := s.Capabilities(ctx)
		if err != nil {
			return nil, fmt.Errorf("capabilities: %w", err)
		}
		caps = append(caps, got...)
	}
	c.built, c.at = catalog.New(caps, c.Workflows), time.Now()
	errs := c.built.WorkflowErrors()
	if s := fmt.Sprint(errs); s != c.rejected && c.Logger != nil {
		logWorkflowErrors(ctx, c.Logger, errs)
	}
	c.rejected = fmt.Sprint(errs)
	return c.built, nil
}

// logWorkflowErrors reports the workflow templates a catalog left out: the
// ones whose skills no source offers in one WARN line naming each missing
// skill (a deployment without those specialists is configured, not
// broken), any other error as an ERROR of its own.
func logWorkflowErrors(ctx context.Context, log *slog.Logger, errs []error) {
	var missing []string
	for _, err := range errs {
		if m, ok := errors.AsType[*catalog.MissingSkillError](err); ok {
			missing = append(missing, m.Workflow+" needs "+m.Skill)
			continue
		}
		log.ErrorContext(ctx, "workflow template left out", "error", err)
	}
	if len(missing) > 0 {
		log.WarnContext(ctx, "workflow templates left out: no specialist offers their skills", "missing", strings.Join(missing, ", "))
	}
}
