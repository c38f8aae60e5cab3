package devstack

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/wire"
)

// Issue 3 and 6: with a Valkey that outlives the local stack, a turn waiting
// for a form survives a restart: the engine resumes the execution on the
// same task token, and the answer sent to the new stack completes the turn.
func TestWaitingTurnSurvivesRestart(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t) // stands in for a real Valkey that keeps running
	dir := t.TempDir()
	cfg := func(c *Config) { c.ValkeyURL = "redis://" + mr.Addr(); c.DataDir = dir }

	first, c := stack(t, nil, cfg)
	cid := c.newConversation()
	tid := c.send(cid, "Design a valve flange with 4 holes")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_input" {
		t.Fatalf("status = %s, want awaiting_input", v.Status)
	}
	callID := v.Form.Calls[0].CallID
	first.Close()

	_, c2 := stack(t, nil, cfg)
	if v := c2.turn(cid, tid); v.Status != "awaiting_input" {
		t.Fatalf("after restart status = %s, want awaiting_input", v.Status)
	}
	if code := c2.input(cid, tid, map[string]any{"answers": map[string]any{callID: map[string]any{"material": "pvc"}}}); code != http.StatusAccepted {
		t.Fatalf("answer after restart = %d, want 202", code)
	}
	if v := c2.wait(cid, tid); v.Status != "succeeded" || len(v.Artifacts) != 1 {
		t.Fatalf("after restart turn = %s %q, want succeeded with the drawing", v.Status, v.Reply)
	}
}

// An accepted cancel survives a crash at any point of it
// (docs/architecture.md, "Who wins a cancel"). The stack stops as a
// process exit would (its engine keeps the execution's snapshot) once the
// cancel's mark is stored but before the cancelled turn is written, while
// a specialist call that had started runs. After the restart the turn
// ends cancelled, not failed; the started call runs to its end and its
// result and artifact join the turn; the turn and the conversation agree;
// and a second restart changes nothing (the end is recorded once).
func TestCancelInFlightAtACrashEndsCancelled(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	slow, agentURL := startSlowAgent(t, time.Minute)
	slow.hold = make(chan struct{})
	m := &model{decide: func(req llm.Request) *llm.Response {
		if len(toolResults(req)) > 0 {
			return calls(call("b", "slow_echo", map[string]any{"text": "second"}))
		}
		return calls(call("a", "create_svg_artifact", map[string]any{"word": "Crash"}))
	}}
	cfg := func(c *Config) {
		c.ValkeyURL = "redis://" + mr.Addr()
		c.DataDir = dir
		c.Agents = []string{agentURL}
	}
	first, c := stack(t, m, cfg)
	cid := c.newConversation()
	tid := c.send(cid, "make a word, then echo slowly")
	c.waitRunning(cid, tid, "slow_echo")
	slow.waitStarted(t)
	// The cancel's first write lands; the process dies before the next.
	if _, err := first.Platform.Store.MarkCancelled(t.Context(), cid, tid); err != nil {
		t.Fatal(err)
	}
	first.Close()

	second, c2 := stack(t, m, cfg)
	close(slow.hold) // the resumed call runs to its end this time
	var v wire.Turn
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		v = c2.turn(cid, tid)
		if s := stepOf(v, "slow_echo"); v.Status != "running" && s != nil && s.Status != "running" {
			break
		}
	}
	if s := stepOf(v, "slow_echo"); v.Status != "cancelled" || s == nil || s.Status != "succeeded" || len(v.Artifacts) != 1 {
		t.Fatalf("turn after the restart = %s %q, steps %+v, %d artifacts; want cancelled, slow_echo succeeded, the SVG kept", v.Status, v.Reply, v.Steps, len(v.Artifacts))
	}
	var conv struct {
		Turns []wire.Turn `json:"turns"`
	}
	c2.do("GET", "/v1/conversations/"+cid, nil, &conv)
	if len(conv.Turns) != 1 || conv.Turns[0].Status != "cancelled" || stepOf(conv.Turns[0], "slow_echo") == nil || stepOf(conv.Turns[0], "slow_echo").Status != "succeeded" {
		t.Errorf("the conversation's turn = %+v, want it to agree with the turn", conv.Turns)
	}
	ended := v.EndedAt
	second.Close()
	_, c3 := stack(t, m, cfg)
	if v := c3.turn(cid, tid); v.Status != "cancelled" || v.EndedAt != ended {
		t.Errorf("after a second restart the turn = %s ended %s, want cancelled ended %s (recorded once)", v.Status, v.EndedAt, ended)
	}
}

// Issue 30, at least once: the loop runs in an EXPRESS child, which is
// never saved. A process that dies while the child's batch runs (the
// specialist has the call) loses the child; after the restart the turn's
// STANDARD execution starts a new child, which finds in the record where
// the turn is: the call runs again (the specialist sees it twice, with the
// same call id), its one result is appended once, and the turn succeeds.
func TestKilledLoopMidBatchResumes(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	slow, agentURL := startSlowAgent(t, time.Minute)
	slow.hold = make(chan struct{})
	m := &model{decide: func(req llm.Request) *llm.Response {
		if len(toolResults(req)) > 0 {
			return &llm.Response{Text: "echoed"}
		}
		return calls(call("a", "slow_echo", map[string]any{"text": "again"}))
	}}
	cfg := func(c *Config) {
		c.ValkeyURL = "redis://" + mr.Addr()
		c.DataDir = dir
		c.Agents = []string{agentURL}
	}
	first, c := stack(t, m, cfg)
	cid := c.newConversation()
	tid := c.send(cid, "echo slowly")
	c.waitRunning(cid, tid, "slow_echo")
	slow.waitStarted(t)
	arn := strings.Replace(first.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + tid
	kids, err := first.Engine.Children(t.Context(), arn)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of the turn's execution = %v, %v; want its one loop", kids, err)
	}
	first.Close() // the process dies mid-batch

	second, c2 := stack(t, m, cfg)
	close(slow.hold) // the call runs to its end this time
	v := c2.wait(cid, tid)
	if s := stepOf(v, "slow_echo"); v.Status != "succeeded" || v.Reply != "echoed" || s == nil || s.Status != "succeeded" {
		t.Fatalf("turn after the restart = %s %q, steps %+v; want succeeded after the echo", v.Status, v.Reply, v.Steps)
	}
	if n := len(toolResults(m.requests()[len(m.requests())-1])); n != 1 {
		t.Errorf("the model read %d tool results, want the call's one", n)
	}
	h, err := second.history(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	if got := countHistory(h); got.Express != 1 || got.Standard != 4 {
		t.Errorf("after the restart the turn's history shows %+v; want the new loop (1 EXPRESS execution) and Init, RunLoop, AfterLoop, Done", got)
	}
	if n := slow.started.Load(); n != 2 {
		t.Errorf("the specialist saw the call %d times, want 2 (once before the crash, once after)", n)
	}
}

// A call that had started when its turn was cancelled, whose step then
// dies with the process (the execution is already stopped, so nothing
// runs it again), is settled once no step that started before the cancel
// can still be running (Config.CallLostAfter): its result says that its
// outcome is unknown, never that it did not run, and the turn, the
// conversation, the history, the audit and the model's next window agree.
func TestCallLostAfterACancelIsSettledAsUnknown(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	slow, agentURL := startSlowAgent(t, time.Minute)
	slow.hold = make(chan struct{})
	t.Cleanup(func() { close(slow.hold) })
	m := &model{decide: func(req llm.Request) *llm.Response {
		if strings.HasPrefix(lastUser(req), "and now") {
			return answer("noted")
		}
		return calls(call("a", "slow_echo", map[string]any{"text": "lost"}))
	}}
	cfg := func(c *Config) {
		c.ValkeyURL = "redis://" + mr.Addr()
		c.DataDir = dir
		c.Agents = []string{agentURL}
		c.CallLostAfter = 2 * time.Second
	}
	first, c := stack(t, m, cfg)
	cid := c.newConversation()
	tid := c.send(cid, "echo slowly")
	c.waitRunning(cid, tid, "slow_echo")
	slow.waitStarted(t) // the cancel below must come after its start
	var v wire.Turn
	if code := c.do("POST", "/v1/conversations/"+cid+"/turns/"+tid+"/cancel", nil, &v); code != http.StatusAccepted {
		t.Fatalf("cancel = %d, want 202", code)
	}
	if s := stepOf(v, "slow_echo"); v.Status != "cancelled" || s == nil || s.Status != "running" {
		t.Fatalf("cancel answered %s, steps %+v; want cancelled with slow_echo running", v.Status, v.Steps)
	}
	first.Close() // the step running the call dies with the process

	_, c2 := stack(t, m, cfg)
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v = c2.turn(cid, tid)
		if s := stepOf(v, "slow_echo"); s != nil && s.Status != "running" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("slow_echo still %+v after 90 s, want its outcome settled as unknown", v.Steps)
		}
	}
	if s := stepOf(v, "slow_echo"); v.Status != "cancelled" || s.Status != "failed" {
		t.Fatalf("turn = %s, steps %+v; want cancelled, slow_echo failed (outcome unknown)", v.Status, v.Steps)
	}
	var conv struct {
		Turns   []wire.Turn         `json:"turns"`
		History []wire.HistoryEntry `json:"history"`
	}
	c2.do("GET", "/v1/conversations/"+cid, nil, &conv)
	if len(conv.Turns) != 1 || stepOf(conv.Turns[0], "slow_echo") == nil || stepOf(conv.Turns[0], "slow_echo").Status != "failed" {
		t.Errorf("the conversation's turn = %+v, want it to agree with the turn", conv.Turns)
	}
	var entry *wire.HistoryEntry
	for i, e := range conv.History {
		if e.Kind == "tool_result" && e.Tool == "slow_echo" {
			entry = &conv.History[i]
		}
		if e.Status == "not_executed" {
			t.Errorf("history says not executed: %+v", e)
		}
	}
	if entry == nil || entry.Status != "failed" || !contains(entry.Content, "unknown") {
		t.Errorf("history entry of slow_echo = %+v, want failed saying the outcome is unknown", entry)
	}
	if kinds := strings.Join(auditKinds(t, dir, tid), ","); !contains(kinds, "lost/failed") || contains(kinds, "not_executed") {
		t.Errorf("audit = %s, want the call lost and nothing not executed", kinds)
	}
	next := c2.send(cid, "and now?")
	c2.wait(cid, next)
	reqs := m.requests()
	if got := resultStatuses(reqs); len(got) != 1 || got[0] != "failed" {
		t.Errorf("results seen by the next turn = %v, want the lost call as failed", got)
	}
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == llm.RoleTool && !contains(msg.Content, "unknown") {
			t.Errorf("the model reads %s, want the outcome called unknown", msg.Content)
		}
	}
}
