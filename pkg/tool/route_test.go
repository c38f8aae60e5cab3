package tool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// source is a tool.Source answering with its name.
type source struct {
	name string
	caps []catalog.Capability
	err  error
	got  []tool.Call
	list int
}

func (s *source) Capabilities(context.Context) ([]catalog.Capability, error) {
	s.list++
	return s.caps, s.err
}

func (s *source) Invoke(_ context.Context, c tool.Call) record.CallOutcome {
	s.got = append(s.got, c)
	return record.CallOutcome{CallID: c.CallID, Result: record.ToolResult{Status: record.ResultSucceeded, Summary: s.name}}
}

var _ tool.Source = (*source)(nil)

// A call goes to the source of its capability's kind; a kind without an
// invoker fails the call, never the turn.
func TestRouterRoutesByKind(t *testing.T) {
	t.Parallel()
	a2a, mcp := &source{name: "a2a"}, &source{name: "mcp"}
	tests := []struct {
		name        string
		router      tool.Router
		cap         catalog.Capability
		wantStatus  string
		wantSummary string
	}{
		{"A2A skill", tool.Router{tool.KindA2A: a2a, tool.KindMCP: mcp}, catalog.Capability{Tool: "render", AgentURL: "http://agent"}, record.ResultSucceeded, "a2a"},
		{"MCP tool", tool.Router{tool.KindA2A: a2a, tool.KindMCP: mcp}, catalog.Capability{Tool: "fs_read", MCPServer: "fs"}, record.ResultSucceeded, "mcp"},
		{"MCP tool without MCP servers", tool.Router{tool.KindA2A: a2a}, catalog.Capability{Tool: "fs_read", MCPServer: "fs"}, record.ResultFailed, ""},
	}
	for _, tt := range tests {
		o := tt.router.Invoke(t.Context(), tool.Call{CallID: "c", Capability: tt.cap})
		if o.Result.Status != tt.wantStatus || o.Result.Summary != tt.wantSummary || o.CallID != "c" {
			t.Errorf("%s: Invoke() = %+v, want status %s summary %q", tt.name, o.Result, tt.wantStatus, tt.wantSummary)
		}
	}
	if len(a2a.got) != 1 || len(mcp.got) != 1 {
		t.Errorf("calls: a2a %d, mcp %d; want one each", len(a2a.got), len(mcp.got))
	}
}

// A workflow's call goes to the workflows' source whatever its (empty)
// capability says.
func TestRouterRoutesWorkflowCalls(t *testing.T) {
	t.Parallel()
	a2a, wf := &source{name: "a2a"}, &source{name: "workflow"}
	r := tool.Router{tool.KindA2A: a2a, tool.KindWorkflow: wf}
	o := r.Invoke(t.Context(), tool.Call{CallID: "c", Workflow: &tool.WorkflowCall{Template: catalog.Workflow{ID: "w"}}})
	if o.Result.Summary != "workflow" || len(a2a.got) != 0 {
		t.Errorf("Invoke() = %+v (a2a got %d calls), want the workflow source's answer", o.Result, len(a2a.got))
	}
	if o := (tool.Router{tool.KindA2A: a2a}).Invoke(t.Context(), tool.Call{CallID: "c", Workflow: &tool.WorkflowCall{}}); o.Result.Status != record.ResultFailed {
		t.Errorf("a workflow call without a workflow source = %+v, want failed", o.Result)
	}
}

// The catalog holds every source's capabilities in source order, is reused
// until invalidated, and fails only when a source's cache does.
func TestCatalogsOverSources(t *testing.T) {
	t.Parallel()
	a2a := &source{caps: []catalog.Capability{{Tool: "render", Description: "Render.", SkillExtension: catalog.SkillExtension{InputSchema: []byte(`{"type":"object"}`)}}}}
	mcp := &source{caps: []catalog.Capability{{Tool: "fs_read", MCPServer: "fs", Description: "Read.", SkillExtension: catalog.SkillExtension{InputSchema: []byte(`{"type":"object"}`)}}}}
	cats := &tool.Catalogs{Sources: []tool.Lister{a2a, mcp}, TTL: time.Hour}
	cat, err := cats.Catalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"render", "fs_read"} {
		if e, ok := cat.Lookup(name); !ok || e.Kind != catalog.EntrySkill {
			t.Errorf("Lookup(%s) = %+v, %v; want a skill", name, e, ok)
		}
	}
	if _, err := cats.Catalog(t.Context()); err != nil || a2a.list != 1 {
		t.Errorf("second Catalog() listed the sources %d times (err %v), want the built one reused", a2a.list, err)
	}
	cats.Invalidate()
	mcp.err = record.ErrUnavailable
	if _, err := cats.Catalog(t.Context()); !errors.Is(err, record.ErrUnavailable) {
		t.Errorf("Catalog() with a cache down = %v, want record.ErrUnavailable", err)
	}
}
