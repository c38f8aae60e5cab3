package eval

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Runner plays scenarios through the API.
type Runner struct {
	Client *Client
	// Poll is how often a running turn is read (zero: 25ms).
	Poll time.Duration
	// TurnTimeout bounds a turn whose scenario sets none (zero: 2m).
	TurnTimeout time.Duration
	// KeepConversations leaves each run's conversation in place (default:
	// deleted once checked).
	KeepConversations bool
}

// Call is one tool call of a turn as the harness observed it.
type Call struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	Status string `json:"status"`
	// Arguments are the call's arguments where the API shows them (the
	// tool_inputs of a succeeded skill call, or the arguments an approval
	// showed); nil where it does not.
	Arguments map[string]any `json:"arguments,omitempty"`
}

// TurnResult is what one turn did and which expectations it failed.
type TurnResult struct {
	Turn         int           `json:"turn"`
	TurnID       string        `json:"turn_id,omitempty"`
	Status       string        `json:"status"`
	Reply        string        `json:"reply,omitempty"`
	Calls        []Call        `json:"calls"`
	Artifacts    []ArtifactRef `json:"artifacts"`
	Pauses       []string      `json:"pauses,omitempty"`
	LLMCalls     int           `json:"llm_calls"`
	Tokens       int           `json:"tokens"`
	CachedTokens int           `json:"cached_tokens"`
	CostUSD      float64       `json:"cost_usd"`
	LatencyMS    float64       `json:"latency_ms"`
	Failures     []Failure     `json:"failures,omitempty"`
}

// Failure is one expectation a turn did not meet, or an error that stopped
// the run (Expectation "run").
type Failure struct {
	Turn        int    `json:"turn"`
	Expectation string `json:"expectation"`
	Want        string `json:"want,omitempty"`
	Got         string `json:"got,omitempty"`
	Detail      string `json:"detail,omitempty"`
}

// String is the failure as the table shows it, e.g.
// `turn 2: status: want succeeded, got failed`.
func (f Failure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "turn %d: %s", f.Turn, f.Expectation)
	if f.Want != "" || f.Got != "" {
		fmt.Fprintf(&b, ": want %s, got %s", f.Want, f.Got)
	}
	if f.Detail != "" {
		fmt.Fprintf(&b, " (%s)", f.Detail)
	}
	return b.String()
}

// Result is one run of one scenario.
type Result struct {
	Scenario       string       `json:"scenario"`
	File           string       `json:"file,omitempty"`
	Run            int          `json:"run"`
	ConversationID string       `json:"conversation_id,omitempty"`
	Pass           bool         `json:"pass"`
	Failures       []Failure    `json:"failures,omitempty"`
	Turns          []TurnResult `json:"turns"`
	LLMCalls       int          `json:"llm_calls"`
	Tokens         int          `json:"tokens"`
	CostUSD        float64      `json:"cost_usd"`
	LatencyMS      float64      `json:"latency_ms"`
}

// RunAll plays every scenario repeat times, at most parallel runs at once,
// and returns the results in scenario order, then run order.
func (r *Runner) RunAll(ctx context.Context, scenarios []*Scenario, repeat, parallel int) []Result {
	repeat, parallel = max(repeat, 1), max(parallel, 1)
	out := make([]Result, len(scenarios)*repeat)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range jobs {
				out[i] = r.Run(ctx, scenarios[i/repeat], i%repeat+1)
			}
		})
	}
	for i := range out {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}

// Run plays one scenario in a new conversation and checks it. It never
// fails: an API error ends the run with a "run" failure.
func (r *Runner) Run(ctx context.Context, s *Scenario, run int) Result {
	res := Result{Scenario: s.Name, File: s.Path, Run: run}
	cid, err := r.Client.CreateConversation(ctx)
	if err != nil {
		res.Failures = append(res.Failures, Failure{Turn: 0, Expectation: "run", Detail: err.Error()})
		return res
	}
	res.ConversationID = cid
	if !r.KeepConversations {
		defer func() { _ = r.Client.DeleteConversation(context.WithoutCancel(ctx), cid) }()
	}
	for i := range s.Turns {
		tr, err := r.playTurn(ctx, s, cid, i)
		res.Turns = append(res.Turns, tr)
		res.Failures = append(res.Failures, tr.Failures...)
		res.LLMCalls += tr.LLMCalls
		res.Tokens += tr.Tokens
		res.CostUSD += tr.CostUSD
		res.LatencyMS += tr.LatencyMS
		if err != nil {
			res.Failures = append(res.Failures, Failure{Turn: i + 1, Expectation: "run", Detail: err.Error()})
			break
		}
	}
	res.Pass = len(res.Failures) == 0
	return res
}

// playTurn sends turn i, answers its pauses from the script until it ends,
// then reads what it did and checks it. An error means the scenario cannot
// go on (the API failed, the turn did not end in time, or it paused with no
// scripted answer).
func (r *Runner) playTurn(ctx context.Context, s *Scenario, cid string, i int) (TurnResult, error) {
	st := &s.Turns[i]
	tr := TurnResult{Turn: i + 1}
	timeout := r.TurnTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if st.Timeout != "" {
		d, err := time.ParseDuration(st.Timeout)
		if err != nil {
			return tr, fmt.Errorf("timeout %q: %w", st.Timeout, err)
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	msg := Message{Text: st.Text, Workflow: st.Workflow}
	for _, f := range st.Files {
		id, err := r.upload(ctx, s, cid, f)
		if err != nil {
			return tr, err
		}
		msg.Files = append(msg.Files, id)
	}
	started := time.Now()
	tid, err := r.Client.Send(ctx, cid, msg)
	if err != nil {
		return tr, fmt.Errorf("send: %w", err)
	}
	tr.TurnID = tid
	script := newScript(st)
	shown := map[string]map[string]any{} // call id → arguments an approval showed
	var v TurnView
	for {
		v, err = r.Client.Turn(ctx, cid, tid)
		if err != nil {
			return tr, r.stop(cid, tid, fmt.Errorf("read turn: %w", err))
		}
		if v.Status == "awaiting_input" && v.Form != nil {
			tr.Pauses = append(tr.Pauses, "form")
			in, err := script.form(v.Form)
			if err != nil {
				return tr, r.stop(cid, tid, err)
			}
			if err := r.Client.Answer(ctx, cid, tid, in); err != nil {
				return tr, r.stop(cid, tid, fmt.Errorf("answer the form: %w", err))
			}
			continue
		}
		if v.Status == "awaiting_approval" && v.Approval != nil {
			tr.Pauses = append(tr.Pauses, "approval")
			for _, c := range v.Approval.Calls {
				shown[c.CallID] = c.Arguments
			}
			in, err := script.approval(v.Approval)
			if err != nil {
				return tr, r.stop(cid, tid, err)
			}
			if err := r.Client.Answer(ctx, cid, tid, in); err != nil {
				return tr, r.stop(cid, tid, fmt.Errorf("answer the approval: %w", err))
			}
			// An edit is what runs: it is the call's arguments from now on.
			for id, a := range in.Approval.Arguments {
				shown[id] = a
			}
			continue
		}
		if v.Status.Final() {
			break
		}
		select {
		case <-ctx.Done():
			return tr, r.stop(cid, tid, fmt.Errorf("the turn did not end within %s (status %s)", timeout, v.Status))
		case <-time.After(r.poll()):
		}
	}
	tr.LatencyMS = float64(time.Since(started).Microseconds()) / 1000
	tr.Status, tr.Reply, tr.Artifacts = string(v.Status), v.Reply, v.Artifacts
	tr.LLMCalls, tr.Tokens, tr.CachedTokens, tr.CostUSD = v.LLMCalls, v.Tokens, v.CachedTokens, v.CostUSD
	history, err := r.Client.History(ctx, cid)
	if err != nil {
		return tr, fmt.Errorf("read the conversation: %w", err)
	}
	tr.Calls = observedCalls(v.Steps, history, tid, shown)
	tr.Failures = Check(i+1, st.Expect, tr)
	tr.Failures = append(tr.Failures, script.unused(i+1)...)
	return tr, nil
}

func (r *Runner) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return 25 * time.Millisecond
}

// stop cancels a turn the harness gives up on, so it does not keep
// running (or waiting) after the scenario, and returns err.
func (r *Runner) stop(cid, tid string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.Client.Cancel(ctx, cid, tid)
	return err
}

func (r *Runner) upload(ctx context.Context, s *Scenario, cid, name string) (string, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(s.Path), name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	typ := mime.TypeByExtension(filepath.Ext(path))
	if typ == "" {
		typ = "application/octet-stream"
	}
	if i := strings.IndexByte(typ, ';'); i >= 0 && !strings.HasPrefix(typ, "text/") {
		typ = typ[:i]
	}
	id, err := r.Client.Upload(ctx, cid, filepath.Base(path), typ, data)
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", name, err)
	}
	return id, nil
}

// observedCalls lists the turn's calls in order from its steps, with the
// arguments the API shows: a succeeded skill call's tool_inputs from the
// history, else what an approval showed.
func observedCalls(steps []StepView, history []HistoryEntry, tid string, shown map[string]map[string]any) []Call {
	inputs := map[string]map[string]any{}
	for _, e := range history {
		if e.TurnID == tid && e.Kind == "tool_result" && e.CallID != "" && e.ToolInputs != nil {
			inputs[e.CallID] = e.ToolInputs
		}
	}
	calls := make([]Call, 0, len(steps))
	for _, s := range steps {
		if s.CallID == "" || s.Parent != "" {
			continue // a model step (tool "llm"), or a workflow's own step: not the model's call
		}
		c := Call{Tool: s.Tool, CallID: s.CallID, Status: s.Status}
		if a, ok := inputs[s.CallID]; ok {
			c.Arguments = a
		} else if a, ok := shown[s.CallID]; ok {
			c.Arguments = a
		}
		calls = append(calls, c)
	}
	return calls
}

// script hands out a turn's scripted answers, each once.
type script struct {
	forms     []FormAnswer
	approvals []ApprovalAnswer
	usedForm  []bool
	usedAppr  []bool
}

func newScript(t *Turn) *script {
	return &script{forms: t.Form, approvals: t.Approval, usedForm: make([]bool, len(t.Form)), usedAppr: make([]bool, len(t.Approval))}
}

// errNoAnswer is a pause the scenario has no scripted answer for.
var errNoAnswer = errors.New("no scripted answer")

func (s *script) form(f *FormView) (Input, error) {
	in := Input{Answers: map[string]map[string]any{}}
	for pos, c := range f.Calls {
		found := -1
		for i, a := range s.forms {
			if s.usedForm[i] || (a.Tool != "" && a.Tool != c.Tool) || (a.Call != 0 && a.Call != pos+1) {
				continue
			}
			found = i
			break
		}
		if found < 0 {
			var fields []string
			for _, fl := range c.Fields {
				fields = append(fields, fl.Name)
			}
			return Input{}, fmt.Errorf("%w: the turn asks for %s of %s (form call %d) and the scenario has no unused form answer for it",
				errNoAnswer, strings.Join(fields, ", "), c.Tool, pos+1)
		}
		s.usedForm[found] = true
		in.Answers[c.CallID] = s.forms[found].Values
	}
	return in, nil
}

func (s *script) approval(a *ApprovalView) (Input, error) {
	var tools []string
	for _, c := range a.Calls {
		tools = append(tools, c.Tool)
	}
	for i, ans := range s.approvals {
		if s.usedAppr[i] || (ans.Tool != "" && !slices.Contains(tools, ans.Tool)) {
			continue
		}
		s.usedAppr[i] = true
		d := &Decision{ID: a.ID, Decision: ans.Decision, Note: ans.Note}
		for _, c := range a.Calls {
			edit, ok := ans.Arguments[c.Tool]
			if !ok {
				continue
			}
			merged := maps.Clone(c.Arguments)
			if merged == nil {
				merged = map[string]any{}
			}
			maps.Copy(merged, edit)
			if d.Arguments == nil {
				d.Arguments = map[string]map[string]any{}
			}
			d.Arguments[c.CallID] = merged
		}
		return Input{Approval: d}, nil
	}
	return Input{}, fmt.Errorf("%w: the turn asks to approve %s and the scenario has no unused approval answer for it",
		errNoAnswer, strings.Join(tools, ", "))
}

// unused reports scripted answers the turn never asked for: a scenario
// that scripts a form expects the form.
func (s *script) unused(turn int) []Failure {
	var out []Failure
	for i, used := range s.usedForm {
		if !used {
			out = append(out, Failure{Turn: turn, Expectation: "form", Want: "a form for " + orAny(s.forms[i].Tool), Got: "none asked"})
		}
	}
	for i, used := range s.usedAppr {
		if !used {
			out = append(out, Failure{Turn: turn, Expectation: "approval", Want: "an approval of " + orAny(s.approvals[i].Tool), Got: "none asked"})
		}
	}
	return out
}

func orAny(tool string) string {
	if tool == "" {
		return "any call"
	}
	return tool
}
