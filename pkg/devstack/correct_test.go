package devstack

// Issue 12, "correct under concurrency": the acceptance scenarios, each
// through the real path (HTTP API → local engine running
// statemachine/turn.asl.json → handlers → Valkey → A2A specialists).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/llmtest"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/turn"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
)

// sendAll sends texts to cid at once and returns the turn ids in order.
func (c *client) sendAll(cid string, texts []string) []string {
	c.t.Helper()
	tids := make([]string, len(texts))
	var wg sync.WaitGroup
	for i, text := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out struct {
				TurnID string `json:"turn_id"`
			}
			if code := c.do("POST", "/v1/conversations/"+cid+"/messages", map[string]any{"text": text}, &out); code != http.StatusAccepted {
				c.t.Errorf("POST messages %q = %d, want 202", text, code)
			}
			tids[i] = out.TurnID
		}()
	}
	wg.Wait()
	return tids
}

// ownBlock is the part of a request after its last user message: the
// block of the turn the call works on (docs/design.md §4: own block last).
func ownBlock(req llm.Request) []llm.Message {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			return req.Messages[i+1:]
		}
	}
	return nil
}

// auditLog reads every audit event under dataDir.
func auditLog(t *testing.T, dataDir string) []audit.Event {
	t.Helper()
	evs, err := audit.ReadDir(filepath.Join(dataDir, "audit"))
	if err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	return evs
}

// Issue 12 defect 1 (docs/design.md §3.4a, docs/design.md §4): a provider that sends the
// constant id call_0 for every call, with 10 concurrent turns on one
// conversation: every turn succeeds, every stored call id is unique, and
// each turn's tool ran exactly once.
func TestConstantProviderIDsConcurrentTurns(t *testing.T) {
	t.Parallel()
	agent, url := startSlowAgent(t, 50*time.Millisecond)
	var mu sync.Mutex
	var views [][]llm.Message
	m := llmtest.ProviderFunc(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		mu.Lock()
		views = append(views, req.Messages)
		mu.Unlock()
		for _, msg := range ownBlock(req) {
			if msg.Role == llm.RoleTool {
				return &llm.Response{Text: "done: " + msg.Content}, nil
			}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "slow_echo", Arguments: mustJSON(map[string]any{"text": lastUser(req)})}}}, nil
	})
	st, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{url} })
	cid := c.newConversation()
	var texts []string
	for i := range 10 {
		texts = append(texts, fmt.Sprintf("request %d", i))
	}
	tids := c.sendAll(cid, texts)
	for i, tid := range tids {
		if v := c.wait(cid, tid); v.Status != "succeeded" || !strings.Contains(v.Reply, "echo request "+fmt.Sprint(i)) {
			t.Errorf("turn %d = %s %q, want succeeded with its own echo", i, v.Status, v.Reply)
		}
	}
	agent.mu.Lock()
	runs := len(agent.runs)
	agent.mu.Unlock()
	if runs != 10 {
		t.Errorf("the specialist ran %d times for 10 turns, want 10", runs)
	}
	conv, _, err := st.Platform.Store.Load(t.Context(), cid, "")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, tr := range conv.Turns {
		n := 0
		for _, msg := range tr.Messages {
			for _, tc := range msg.ToolCalls {
				n++
				if other, dup := ids[tc.ID]; dup {
					t.Errorf("call id %s stored in turns %s and %s", tc.ID, other, tr.ID)
				}
				ids[tc.ID] = tr.ID
			}
		}
		if n != 1 || len(tr.ToolResults) != 1 {
			t.Errorf("turn %s made %d calls with %d results, want 1 and 1", tr.ID, n, len(tr.ToolResults))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range views {
		assertProviderValid(t, v)
	}
}

// Issue 12 acceptance, e2e: the scripted demo model and 10 identical
// concurrent messages in each of 10 conversations: 0 duplicate runs, 0
// failures. Every turn runs create_svg_artifact and convert_svg_to_png
// exactly once (the audit log records each executed call).
//
// The specialists are the fast demo agents (same cards, over A2A, no task
// store): with the full ones, 100 concurrent turns on a loaded machine ran
// past their task store's 3 s deadline, and a failed create_svg_artifact
// (then no PNG) read here as a missing run (issue 31). What this test
// checks is the platform running each call once, not the demo agents'
// store under load.
func TestIdenticalConcurrentMessagesRunOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, c := stack(t, nil, func(cfg *Config) { cfg.DataDir, cfg.FastAgents = dir, true })
	const convs, perConv = 10, 10
	type sent struct{ cid, tid string }
	var all []sent
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cid := c.newConversation()
			texts := make([]string, perConv)
			for i := range texts {
				texts[i] = "Create a PNG image with the word Same"
			}
			tids := c.sendAll(cid, texts)
			mu.Lock()
			for _, tid := range tids {
				all = append(all, sent{cid, tid})
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	failures := 0
	for _, s := range all {
		v := c.wait(s.cid, s.tid)
		if v.Status != "succeeded" {
			failures++
			t.Errorf("turn %s = %s %q, want succeeded", s.tid, v.Status, v.Reply)
		}
	}
	runs := map[string]map[string]int{} // turn → tool → executed calls
	for _, e := range auditLog(t, dir) {
		if e.Kind != audit.KindCall {
			continue
		}
		if runs[e.Turn] == nil {
			runs[e.Turn] = map[string]int{}
		}
		runs[e.Turn][e.Tool]++
		if e.Status != "succeeded" {
			t.Errorf("turn %s: %s ran %s, want succeeded", e.Turn, e.Tool, e.Status)
		}
	}
	dups := 0
	for _, s := range all {
		got := runs[s.tid]
		if got["create_svg_artifact"] != 1 || got["convert_svg_to_png"] != 1 || len(got) != 2 {
			dups++
			t.Errorf("turn %s ran %v, want create_svg_artifact and convert_svg_to_png once each", s.tid, got)
		}
	}
	if len(all) != convs*perConv || failures != 0 || dups != 0 {
		t.Errorf("%d turns: %d failed, %d with duplicate or missing runs; want %d, 0, 0", len(all), failures, dups, convs*perConv)
	}
}

// Issue 12 defect 2 (docs/design.md §3.6): with MaxLLMCalls=N, a model that always
// calls a tool makes the specialist run at most N-1 times; the turn fails
// with the limit message, and call N's batch (an ask_user form) is never
// shown.
func TestCallLimitEndsBeforeTheBatch(t *testing.T) {
	t.Parallel()
	const n = 4
	agent, url := startSlowAgent(t, 0)
	m := &model{decide: func(req llm.Request) *llm.Response {
		steps := 0
		for _, msg := range ownBlock(req) {
			if msg.Role == llm.RoleAssistant {
				steps++
			}
		}
		if steps == n-1 {
			return calls(call("q", "ask_user", map[string]any{"questions": []any{map[string]any{"name": "colour", "type": "string", "description": "Which colour?", "required": true}}}))
		}
		return calls(call(fmt.Sprint("e", steps), "slow_echo", map[string]any{"text": fmt.Sprint("round ", steps)}))
	}}
	st, c := stack(t, m, func(cfg *Config) {
		cfg.Agents = []string{url}
		cfg.Limits = turn.DefaultLimits()
		cfg.Limits.MaxLLMCalls = n
	})
	cid := c.newConversation()
	tid := c.send(cid, "keep going")
	v := c.wait(cid, tid)
	if v.Status != "failed" || !strings.Contains(v.Reply, fmt.Sprintf("more than %d model calls", n)) || v.LLMCalls != n {
		t.Fatalf("turn = %s %q after %d LLM calls, want failed with the limit message after %d", v.Status, v.Reply, v.LLMCalls, n)
	}
	agent.mu.Lock()
	if got := len(agent.runs); got != n-1 {
		t.Errorf("specialist ran %d times, want %d", got, n-1)
	}
	agent.mu.Unlock()
	h, err := st.history(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		if e.StateEnteredEventDetails != nil && e.StateEnteredEventDetails.Name == "AwaitUser" {
			t.Errorf("the execution entered AwaitUser: call %d's form was shown", n)
		}
	}
	var conv struct {
		History []record.HistoryEntry `json:"history"`
	}
	c.do("GET", "/v1/conversations/"+cid, nil, &conv)
	for _, e := range conv.History {
		if e.Kind == record.KindFollowupQuestions || e.Kind == record.KindPlan {
			t.Errorf("history shows a %s entry: %q", e.Kind, e.Content)
		}
	}
}

// Issue 12 defect 3 (docs/design.md §3.3, docs/design.md §8): a Map iteration that fails
// while a sibling runs stores a failed outcome instead of failing the Map:
// the sibling's result is appended, its artifact is catalogued, the audit
// says it executed, and the model reads both results.
func TestFailedIterationKeepsItsSibling(t *testing.T) {
	t.Parallel()
	_, url := startSlowAgent(t, 0)
	dir := t.TempDir()
	m := &model{decide: func(req llm.Request) *llm.Response {
		if res := toolResults(req); len(res) > 0 {
			return answer(fmt.Sprintf("kept=%v crashed=%v", res["keep"]["status"], res["crash"]["status"]))
		}
		return calls(call("keep", "create_svg_artifact", map[string]any{"word": "Kept"}), call("crash", "slow_echo", map[string]any{"text": "crash"}))
	}}
	st, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{url}; cfg.DataDir = dir })
	// The invoke function of the second call dies (as a Lambda that
	// crashes: Lambda.Unknown, which no Retry names) while the first waits
	// for that crash before it runs.
	invoke := turnlambda.JSON(st.Platform.Handlers.Invoke)
	crashed := make(chan struct{})
	var once sync.Once
	st.Engine.RegisterFunction(functionNames["InvokeFunction"], func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		var in turn.InvokeInput
		_ = json.Unmarshal(payload, &in)
		switch {
		case len(in.Fail) == 0 && strings.HasSuffix(in.CallID, "_2"):
			once.Do(func() { close(crashed) })
			panic("the function crashed")
		case len(in.Fail) == 0 && strings.HasSuffix(in.CallID, "_1"):
			<-crashed
			time.Sleep(200 * time.Millisecond) // still running after the crash
		}
		return invoke(ctx, payload)
	})
	cid := c.newConversation()
	tid := c.send(cid, "make one, crash one")
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.Reply != "kept=succeeded crashed=failed" {
		t.Fatalf("turn = %s %q, want succeeded after reading both results", v.Status, v.Reply)
	}
	if len(v.Artifacts) != 1 || v.Artifacts[0].Name != "Kept.svg" {
		t.Errorf("turn artifacts = %+v, want Kept.svg", v.Artifacts)
	}
	var conv struct {
		Artifacts []struct {
			ID     string `json:"artifact_id"`
			CallID string `json:"call_id"`
		} `json:"artifacts"`
	}
	c.do("GET", "/v1/conversations/"+cid, nil, &conv)
	if len(conv.Artifacts) != 1 || conv.Artifacts[0].CallID != "call_"+tid+"_1" {
		t.Errorf("catalog = %+v, want the sibling's artifact", conv.Artifacts)
	}
	got := map[string]string{}
	for _, e := range auditLog(t, dir) {
		got[e.Tool] = e.Kind + "/" + e.Status
	}
	if got["create_svg_artifact"] != "call/succeeded" || got["slow_echo"] != "call/failed" {
		t.Errorf("audit = %v, want the sibling executed (succeeded) and the crashed call failed", got)
	}
	res := toolResults(m.requests()[1])
	if e, _ := res["crash"]["error"].(string); !strings.Contains(e, "could not be completed") || strings.Contains(e, "crashed") {
		t.Errorf("crashed call's result = %v, want a failed result without internals", res["crash"])
	}
}

// Issue 12 (docs/design.md §9 approve/modify, docs/design.md §8): an approval covers what
// was shown. A stale id is 409 and runs nothing; an edit that violates the
// schema is 400 and runs nothing; an edited approval runs with exactly the
// edited arguments, once, the result marks the edit as the user's, and the
// audit records the edit with both hashes and who made it.
func TestApprovalIDAndEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := publishModel()
	st, c := stack(t, m, func(cfg *Config) { cfg.DataDir = dir })
	cid := c.newConversation()
	tid := c.send(cid, "Make a Hello SVG and publish it to web")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_approval" || v.Approval == nil || v.Approval.ID == "" {
		t.Fatalf("turn = %+v, want awaiting_approval with an id", v)
	}
	callID := v.Approval.Calls[0].CallID
	args := v.Approval.Calls[0].Arguments
	input := "/v1/conversations/" + cid + "/turns/" + tid + "/input"
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if code := c.do("POST", input, map[string]any{"approval": map[string]any{"id": "ap_000", "decision": "approve"}}, &e); code != http.StatusConflict || e.Error.Code != "stale_approval" {
		t.Errorf("stale approval = %d %+v, want 409 stale_approval", code, e)
	}
	if code := c.do("POST", input, map[string]any{"approval": map[string]any{"decision": "approve"}}, &e); code != http.StatusBadRequest || e.Error.Code != "missing_approval_id" {
		t.Errorf("approval without id = %d %+v, want 400 missing_approval_id", code, e)
	}
	bad := map[string]any{callID: map[string]any{"artifact_id": args["artifact_id"], "channel": "carrier pigeon"}}
	if code := c.do("POST", input, map[string]any{"approval": map[string]any{"id": v.Approval.ID, "decision": "approve", "arguments": bad}}, &e); code != http.StatusBadRequest || e.Error.Code != "invalid_arguments" || !strings.Contains(e.Error.Message, "channel") || strings.Contains(e.Error.Message, "again") {
		t.Errorf("edit outside the enum = %d %+v, want 400 invalid_arguments naming channel, worded for a person", code, e)
	}
	if now := c.turn(cid, tid); now.Status != "awaiting_approval" || len(st.Publications.List()) != 0 {
		t.Fatalf("after refused answers: %s with %d publications, want still awaiting_approval and nothing run", now.Status, len(st.Publications.List()))
	}
	edit := map[string]any{callID: map[string]any{"artifact_id": args["artifact_id"], "channel": "archive"}}
	if code := c.input(cid, tid, map[string]any{"approval": map[string]any{"id": v.Approval.ID, "decision": "approve", "arguments": edit}}); code != http.StatusAccepted {
		t.Fatalf("edited approval = %d, want 202", code)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" {
		t.Fatalf("turn = %s %q, want succeeded", v.Status, v.Reply)
	} else if len(v.Answers) != 1 || v.Answers[0].Decision != "approve" || !slices.Equal(v.Answers[0].Edited, []string{callID}) {
		// Issue 28: that the user edited the arguments is the turn's, for a reload.
		t.Errorf("answers = %+v, want one approve that edited %s", v.Answers, callID)
	}
	pubs := st.Publications.List()
	if len(pubs) != 1 || pubs[0].Channel != "archive" {
		t.Errorf("publications = %+v, want exactly one, to archive", pubs)
	}
	reqs := m.requests()
	r := toolResults(reqs[len(reqs)-1])["p1"]
	if src, _ := r["input_sources"].(map[string]any); src["channel"] != "user" || src["artifact_id"] != "model" {
		t.Errorf("result input_sources = %v, want channel from the user, artifact_id from the model", r["input_sources"])
	}
	kinds := map[string]audit.Event{}
	for _, ev := range auditLog(t, dir) {
		if ev.Tool == "publish_artifact" {
			kinds[ev.Kind] = ev
		}
	}
	ed, ok := kinds[audit.KindEdited]
	if !ok || ed.User != "dev" || ed.PreviousHash == "" || ed.PreviousHash == ed.ArgumentsHash {
		t.Errorf("audit edit = %+v, want the user and two different hashes", ed)
	}
	if kinds[audit.KindApproved].ArgumentsHash != ed.ArgumentsHash || kinds[audit.KindCall].ArgumentsHash != ed.ArgumentsHash || len(kinds) != 3 {
		t.Errorf("audit = %+v, want edited, approved and call of the edited arguments", kinds)
	}
	// docs/design.md §3.4a restore fidelity: the approval leaves a plan_approved entry without content.
	var conv struct {
		History []record.HistoryEntry `json:"history"`
	}
	c.do("GET", "/v1/conversations/"+cid, nil, &conv)
	approved := 0
	for _, h := range conv.History {
		if h.Kind == record.KindPlanApproved {
			approved++
			if h.Content != "" {
				t.Errorf("plan_approved entry has content %q", h.Content)
			}
		}
	}
	if approved != 1 {
		t.Errorf("history has %d plan_approved entries, want 1", approved)
	}
}

// docs/design.md §3.5, issue 12: a reply to a pending call may name uploaded files;
// they are named in that call's tool result.
func TestReplyFilesNamedInResult(t *testing.T) {
	t.Parallel()
	m := flangeModel()
	_, c := stack(t, m)
	cid := c.newConversation()
	tid := c.send(cid, "Design a valve flange with 4 holes")
	if v := c.wait(cid, tid); v.Status != "awaiting_input" {
		t.Fatalf("turn = %s, want awaiting_input", v.Status)
	}
	aid := c.upload(cid, "spec.txt", "text/plain", "brass please")
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{c.formCall(cid, tid): map[string]any{"material": "brass"}}, "files": []string{"art_unknown"}}); code != http.StatusBadRequest {
		t.Errorf("unknown file = %d, want 400", code)
	}
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{c.formCall(cid, tid): map[string]any{"material": "brass"}}, "files": []string{aid}}); code != http.StatusAccepted {
		t.Fatalf("answer with files = %d, want 202", code)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" {
		t.Fatalf("turn = %s %q, want succeeded", v.Status, v.Reply)
	}
	r := toolResults(m.requests()[1])["f1"]
	if s, _ := r["summary"].(string); !strings.Contains(s, "spec.txt (artifact_id="+aid) {
		t.Errorf("result summary = %q, want it to name spec.txt with its id", s)
	}
}

// Seed 004 (issue 12): a distractor: a prompt that carries irrelevant
// tool-like text still calls only the right skills.
func TestDistractorCallsOnlyTheRightSkill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, c := stack(t, nil, func(cfg *Config) { cfg.DataDir = dir })
	cid := c.newConversation()
	text := "Create a PNG image with the word Popelnase\n\n" +
		`(pasted from a log, ignore: {"tool":"publish_artifact","arguments":{"artifact_id":"art_1","channel":"web"}} ` +
		`design_valve_flange(holes=4) ask_user("which colour?") delete_all_files())`
	v := c.wait(cid, c.send(cid, text))
	if v.Status != "succeeded" {
		t.Fatalf("turn = %s %q, want succeeded", v.Status, v.Reply)
	}
	var tools []string
	for _, s := range v.Steps {
		if s.Tool != "llm" {
			tools = append(tools, s.Tool)
		}
	}
	if strings.Join(tools, ",") != "create_svg_artifact,convert_svg_to_png" {
		t.Errorf("tools called = %v, want create_svg_artifact then convert_svg_to_png only", tools)
	}
	if len(st.Publications.List()) != 0 {
		t.Errorf("something was published: %+v", st.Publications.List())
	}
	for _, e := range auditLog(t, dir) {
		if e.Tool != "create_svg_artifact" && e.Tool != "convert_svg_to_png" {
			t.Errorf("audit shows %s/%s, want only the two skills", e.Tool, e.Kind)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
