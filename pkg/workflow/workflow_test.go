package workflow_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
	"github.com/clientagent/clientagent/pkg/workflow"
)

// store keeps the steps' outcomes; cancelled refuses every StartCall.
type store struct {
	mu        sync.Mutex
	put       map[string]record.CallOutcome
	cancelled bool
}

func (s *store) StartCall(context.Context, string, string, string, ...record.Event) (bool, error) {
	return !s.cancelled, nil
}

func (s *store) PutOutcome(_ context.Context, _, _ string, o record.CallOutcome) (record.Put, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put[o.CallID] = o
	return record.Put{Stored: true}, nil
}

// skills answer each call with one artifact named after the call.
type skills struct{ got []tool.Call }

func (k *skills) Invoke(_ context.Context, c tool.Call) record.CallOutcome {
	k.got = append(k.got, c)
	a := artifact.Artifact{ID: "art_" + c.CallID, Name: c.Capability.Tool + ".out"}
	return record.CallOutcome{Result: record.ToolResult{Status: record.ResultSucceeded, Summary: "ran " + c.Capability.Tool,
		Artifacts: []artifact.Ref{a.Ref()}}, Artifacts: []artifact.Artifact{a}}
}

func twoSteps(t *testing.T) (catalog.Workflow, *catalog.Catalog) {
	t.Helper()
	schema := func(prop string) catalog.SkillExtension {
		return catalog.SkillExtension{InputSchema: json.RawMessage(`{"type":"object","properties":{"` + prop + `":{"type":"string"}},"required":["` + prop + `"]}`)}
	}
	caps := []catalog.Capability{
		{Tool: "draw", AgentURL: "http://a", SkillExtension: schema("word")},
		{Tool: "convert", AgentURL: "http://a", SkillExtension: schema("artifact_id")},
	}
	var wf catalog.Workflow
	if err := json.Unmarshal([]byte(`{"id":"w","name":"W","inputs":[{"path":"word"}],"steps":[
		{"id":"a","skill":"draw","arguments":{"word":"{{inputs.word}}"}},
		{"id":"b","skill":"convert","arguments":{"artifact_id":"{{steps.a.artifact}}"}}]}`), &wf); err != nil {
		t.Fatal(err)
	}
	cat := catalog.New(caps, []catalog.Workflow{wf})
	e, ok := cat.Lookup(catalog.WorkflowToolName("w"))
	if !ok {
		t.Fatalf("the workflow did not compile: %v", cat.WorkflowErrors())
	}
	return e.Workflow, cat
}

func call(wf catalog.Workflow, cat *catalog.Catalog, done map[string]record.CallOutcome) tool.Call {
	return tool.Call{ConversationID: "c", TurnID: "t", CallID: "call_1", Arguments: map[string]any{"word": "hi"},
		Workflow: &tool.WorkflowCall{Template: wf, Catalog: cat, Known: map[string]artifact.Artifact{}, Done: done}}
}

// Each step's artifact feeds the next step's binding, every finished step
// is stored under its own id, and a call routed by kind reaches the
// workflow's source.
func TestStepsFeedTheNextAndAreStored(t *testing.T) {
	t.Parallel()
	wf, cat := twoSteps(t)
	st, sk := &store{put: map[string]record.CallOutcome{}}, &skills{}
	r := tool.Router{tool.KindA2A: sk, tool.KindWorkflow: &workflow.Source{Store: st, Steps: sk}}
	o := r.Invoke(t.Context(), call(wf, cat, nil))
	if o.Result.Status != record.ResultSucceeded || len(o.Artifacts) != 2 || o.ContinuesAt != 0 {
		t.Fatalf("outcome = %+v, want succeeded with both steps' artifacts", o)
	}
	if len(sk.got) != 2 || sk.got[1].Arguments["artifact_id"] != "art_call_1.0" || len(sk.got[1].Files) != 1 {
		t.Errorf("step calls = %+v, want the second naming (and carrying) the first's artifact", sk.got)
	}
	for _, id := range []string{"call_1.0", "call_1.1"} {
		if o, ok := st.put[id]; !ok || o.StartedAt.IsZero() {
			t.Errorf("step %s stored = %+v, %v; want stored with its start", id, o, ok)
		}
	}
}

// An invocation resumes after the stored steps, and one with too little
// time left before the next step says where it continues, running nothing.
func TestResumesAfterStoredStepsAndContinues(t *testing.T) {
	t.Parallel()
	wf, cat := twoSteps(t)
	first := (&skills{}).Invoke(t.Context(), tool.Call{CallID: "call_1.0", Capability: catalog.Capability{Tool: "draw"}})
	done := map[string]record.CallOutcome{"call_1.0": first}

	st, sk := &store{put: map[string]record.CallOutcome{}}, &skills{}
	src := &workflow.Source{Store: st, Steps: sk, CallTimeout: time.Minute}
	if o := src.Invoke(t.Context(), call(wf, cat, done)); o.Result.Status != record.ResultSucceeded || len(sk.got) != 1 || sk.got[0].CallID != "call_1.1" {
		t.Errorf("resumed: outcome %+v, calls %+v; want only step 2 run", o.Result, sk.got)
	}

	sk = &skills{}
	src.Steps = sk
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	src.CallTimeout = 2 * time.Hour // never time for a second step
	if o := src.Invoke(ctx, call(wf, cat, nil)); o.ContinuesAt != 2 || len(sk.got) != 1 {
		t.Errorf("short of time: outcome %+v after %d calls, want ContinuesAt 2 after one", o, len(sk.got))
	}
}

// A cancel stops the workflow before its next step; the step that ran
// keeps its artifact.
func TestCancelStopsBetweenSteps(t *testing.T) {
	t.Parallel()
	wf, cat := twoSteps(t)
	st, sk := &store{put: map[string]record.CallOutcome{}, cancelled: true}, &skills{}
	o := (&workflow.Source{Store: st, Steps: sk}).Invoke(t.Context(), call(wf, cat, nil))
	if o.Result.Status != record.ResultFailed || len(sk.got) != 1 || len(o.Artifacts) != 1 {
		t.Errorf("cancelled: outcome %+v after %d calls, want failed after one, keeping its artifact", o, len(sk.got))
	}
}
