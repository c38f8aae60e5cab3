// Package workflow runs the tools of workflow templates (docs/workflows.md):
// the source of tool.KindWorkflow, routed by kind like the specialists and
// the MCP servers. A workflow call runs its template's steps in order, each
// a call of a skill given to another source's invoker (Steps); each step's
// artifacts feed the next step's bindings. The templates themselves are
// compiled into the catalog by tool.Catalogs.
//
// It speaks no transport: the steps' calls go through Steps, and what it
// keeps of them goes through Store.
package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// Store is what a workflow keeps of its steps in the record; record.Store
// is one.
type Store interface {
	// StartCall starts a step unless the turn is marked cancelled.
	StartCall(ctx context.Context, cid, turnID, callID string, evs ...record.Event) (bool, error)
	// PutOutcome stores a finished step under its own id.
	PutOutcome(ctx context.Context, cid, turnID string, o record.CallOutcome) (record.Put, error)
}

// Source runs workflow calls (tool.Invoker of tool.KindWorkflow). It is
// safe for concurrent use.
type Source struct {
	Store Store
	// Steps runs each step's skill call.
	Steps tool.Invoker
	// CallTimeout is the longest one step's call may take: a step starts
	// in the same invocation only with that much time left before ctx's
	// deadline; otherwise the call continues in a new one (ContinuesAt).
	// Zero: always in the same invocation.
	CallTimeout time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

var _ tool.Invoker = (*Source)(nil)

// Invoke runs c's workflow (c.Workflow) after the steps it stored before.
// Each finished step is stored under its own id (record.WorkflowStepID,
// also its A2A call id) beside the call's outcome, so an invocation
// resumes after the steps stored, and one that has less than CallTimeout
// left before the next step returns an outcome with ContinuesAt set instead
// of starting it. A cancel stops it between steps; a step whose specialist
// asks the user pauses it with that form; a failing step fails it, naming
// the step. Like every invoker it never fails: what goes wrong is a failed
// outcome.
func (s *Source) Invoke(ctx context.Context, c tool.Call) record.CallOutcome {
	w := c.Workflow
	if w == nil {
		return failed(fmt.Sprintf("tool %s is no workflow", c.Capability.Tool))
	}
	wf := w.Template
	var (
		all     record.CallOutcome
		outputs []catalog.StepOutput
		summary []string
		ran     bool
	)
	all.Result.Status = record.ResultSucceeded
	for i, st := range wf.Steps {
		stepID := record.WorkflowStepID(c.CallID, i)
		o, done := w.Done[stepID]
		if !done || o.Result.Status != record.ResultSucceeded {
			if ran && !s.timeForStep(ctx) {
				return record.CallOutcome{ContinuesAt: i + 1}
			}
			if i > 0 {
				// A cancel stops a workflow between its steps: the
				// steps that ran keep their results and files.
				if ok, err := s.Store.StartCall(ctx, c.ConversationID, c.TurnID, stepID); err == nil && !ok {
					f := failed(fmt.Sprintf("workflow %s stopped before %s: the turn was cancelled; the steps before it ran", wf.ID, wf.StepLabel(i)))
					f.Artifacts, f.Result.Artifacts = all.Artifacts, all.Result.Artifacts
					return f
				}
			}
			ran = true
			stepStart := s.now()
			var stop *record.CallOutcome
			if o, stop = s.step(ctx, c, i, outputs); stop != nil {
				return *stop
			}
			if o.Result.Status != record.ResultSucceeded {
				f := failed(fmt.Sprintf("workflow %s %s failed: %s", wf.ID, wf.StepLabel(i), o.Result.Error))
				f.Artifacts, f.Result.Artifacts = all.Artifacts, all.Result.Artifacts
				return f
			}
			// Every finished step is stored, the last too: a retry
			// resumes after it, and the turn shows it nested under its
			// workflow.
			if o.StartedAt.IsZero() {
				o.StartedAt, o.EndedAt = stepStart, s.now()
			}
			s.storeStep(ctx, c, stepID, st.Skill, o)
		}
		var ids []string
		for _, a := range o.Artifacts {
			w.Known[a.ID] = a
			ids = append(ids, a.ID)
		}
		out := catalog.StepOutput{Artifacts: ids, Summary: o.Result.Summary}
		if o.Result.Result != "" {
			_ = json.Unmarshal([]byte(o.Result.Result), &out.Result)
		}
		outputs = append(outputs, out)
		all.Artifacts = append(all.Artifacts, o.Artifacts...)
		all.Result.Artifacts = append(all.Result.Artifacts, o.Result.Artifacts...)
		if o.Result.Summary != "" {
			summary = append(summary, fmt.Sprintf("%s: %s", wf.StepLabel(i), o.Result.Summary))
		}
	}
	all.Result.Summary = fmt.Sprintf("Workflow %s finished %d steps.\n%s", wf.Name, len(wf.Steps), strings.Join(summary, "\n"))
	return all
}

// step runs step i of c's workflow with the outputs of the steps before
// it and returns its outcome, or the workflow call's own outcome when the
// step ends the call before it ran (it could not start) or asks the user.
func (s *Source) step(ctx context.Context, c tool.Call, i int, outputs []catalog.StepOutput) (record.CallOutcome, *record.CallOutcome) {
	w := c.Workflow
	wf, st := w.Template, w.Template.Steps[i]
	args, err := wf.StepArguments(i, c.Arguments, outputs)
	if err != nil {
		f := failed(fmt.Sprintf("workflow %s %s could not start: %v", wf.ID, wf.StepLabel(i), err))
		return record.CallOutcome{}, &f
	}
	entry, ok := w.Catalog.Lookup(st.Skill)
	if !ok || entry.Kind != catalog.EntrySkill {
		f := failed(fmt.Sprintf("workflow %s %s: skill %s is not available", wf.ID, wf.StepLabel(i), st.Skill))
		return record.CallOutcome{}, &f
	}
	call := tool.Call{
		ConversationID: c.ConversationID,
		TurnID:         c.TurnID,
		CallID:         record.WorkflowStepID(c.CallID, i),
		Capability:     entry.Capability,
		Arguments:      args,
		Sources:        wf.StepSources(i, c.Sources),
		Files:          tool.ReferencedFiles(args, w.Known),
	}
	if c.Continue != nil && c.Continue.WorkflowStep == i+1 {
		// This step's specialist asked the user: the answer continues its
		// task.
		call.Continue = c.Continue
		call.Arguments, call.Sources = withAnswers(wf, entry, args, call.Sources, c)
	}
	o := s.Steps.Invoke(ctx, call)
	if o.InputRequired != nil {
		// The workflow call waits with the specialist's form; the finished
		// steps are stored, and the answer resumes here.
		ir := *o.InputRequired
		ir.Task.WorkflowStep = i + 1
		ir.Message = fmt.Sprintf("%s of workflow %s asks: %s", wf.StepLabel(i), wf.ID, ir.Message)
		return record.CallOutcome{}, &record.CallOutcome{InputRequired: &ir}
	}
	return o, nil
}

// withAnswers returns a step's arguments with the user's answers to its
// specialist's input-required form (which the answer merged into the
// workflow call's arguments under the skill's own field names; for an MCP
// tool, also the fields its elicitation asked for), and the sources
// marking them as the user's.
func withAnswers(wf catalog.Workflow, skill catalog.Entry, args map[string]any, stepSources map[string]string, c tool.Call) (map[string]any, map[string]string) {
	out := maps.Clone(args)
	if out == nil {
		out = map[string]any{}
	}
	sources := maps.Clone(stepSources)
	if sources == nil {
		sources = map[string]string{}
	}
	declared := map[string]bool{}
	for _, in := range wf.Inputs {
		declared[in.Path] = true
	}
	// An MCP server's elicitation asks for fields that are not the tool's
	// parameters; its invoker takes them from the arguments (pkg/mcp).
	elicits := skill.Capability.MCPServer != ""
	for k, v := range c.Arguments {
		_, isParam := skill.Param(k)
		if (isParam || elicits) && !declared[k] && c.Sources[k] == batch.SourceUser {
			out[k], sources[k] = v, batch.SourceUser
		}
	}
	return out, sources
}

// timeForStep reports whether ctx leaves CallTimeout for one more step.
func (s *Source) timeForStep(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return !ok || s.CallTimeout <= 0 || time.Until(dl) >= s.CallTimeout
}

// storeStep keeps a finished step. It is what a resumed or retried
// invocation starts after; failing to store it costs only a rerun of the
// step (the specialist sees the same call id), so it is logged, not fatal.
func (s *Source) storeStep(ctx context.Context, c tool.Call, stepID, skill string, o record.CallOutcome) {
	o.CallID, o.Tool = stepID, skill
	if _, err := s.Store.PutOutcome(ctx, c.ConversationID, c.TurnID, o); err != nil {
		s.log().WarnContext(ctx, "store workflow step", "conversation", c.ConversationID, "turn", c.TurnID, "step", stepID, "error", err)
	}
}

func failed(msg string) record.CallOutcome {
	return record.CallOutcome{Result: record.ToolResult{Status: record.ResultFailed, Error: msg}}
}

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Source) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
