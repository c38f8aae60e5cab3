package devstack

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
	"github.com/clientagent/clientagent/pkg/wire"
)

// Who wins a cancel (docs/architecture.md): an approve and a cancel sent
// 0–20 ms apart, many times. Whichever the store orders first decides,
// and every view tells the same story: if the specialist published, the
// turn's publish step, the history and the audit say it succeeded and
// nothing says it was not executed; if it did not publish, they all say
// not executed and the audit holds no executed call.
func TestCancelRacingAnApprovalIsRecordedTruthfully(t *testing.T) {
	t.Parallel()
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	dir := t.TempDir()
	st, c := stack(t, scripted.Demo(), func(cfg *Config) { cfg.DataDir = dir })
	var published, notRun, cancelled int
	for round := range rounds {
		cid := c.newConversation()
		if v := c.wait(cid, c.send(cid, "Create a PNG image with the word Race")); v.Status != "succeeded" {
			t.Fatalf("round %d: first turn = %s", round, v.Status)
		}
		tid := c.send(cid, "Publish it to web")
		v := c.wait(cid, tid)
		if v.Status != "awaiting_approval" || v.Approval == nil {
			t.Fatalf("round %d: turn = %s, want awaiting_approval", round, v.Status)
		}
		callID := v.Approval.Calls[0].CallID
		offset := time.Duration(rand.IntN(20_000)) * time.Microsecond
		approveFirst := rand.IntN(2) == 0
		var wg sync.WaitGroup
		var approveCode, cancelCode int
		approve := func() {
			approveCode = c.input(cid, tid, map[string]any{"approval": map[string]any{"id": v.Approval.ID, "decision": "approve"}})
		}
		cancel := func() {
			cancelCode = c.do("POST", "/v1/conversations/"+cid+"/turns/"+tid+"/cancel", nil, nil)
		}
		first, second := approve, cancel
		if !approveFirst {
			first, second = cancel, approve
		}
		wg.Go(first)
		wg.Go(func() { time.Sleep(offset); second() })
		wg.Wait()
		if cancelCode != http.StatusAccepted && cancelCode != http.StatusConflict {
			t.Fatalf("round %d: cancel = %d, want 202 or 409", round, cancelCode)
		}
		if approveCode != http.StatusAccepted && approveCode != http.StatusConflict {
			t.Fatalf("round %d: approve = %d, want 202 or 409", round, approveCode)
		}
		// Wait until the turn has ended and no step still runs.
		deadline := time.Now().Add(20 * time.Second)
		for v = c.turn(cid, tid); time.Now().Before(deadline); v = c.turn(cid, tid) {
			if v.Status != "running" && stepOf(v, "publish_artifact") != nil && stepOf(v, "publish_artifact").Status != "running" {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		ran := false
		for _, p := range st.Publications.List() {
			if p.CallID == callID {
				ran = true
			}
		}
		step := stepOf(v, "publish_artifact")
		if step == nil {
			t.Fatalf("round %d: turn %s has no publish step: %+v", round, v.Status, v.Steps)
		}
		// A call that ran after the cancel shows in the turn as soon as its
		// outcome is stored, and in the history once it is settled.
		var history []string
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			history = history[:0]
			for _, h := range c.historyOf(cid) {
				if h["tool"] == "publish_artifact" {
					history = append(history, h["status"].(string))
				}
			}
			if len(history) > 0 || time.Now().After(end) {
				break
			}
		}
		// The executed call is audited right after its outcome is stored.
		var events []string
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			events = events[:0]
			for _, e := range auditLog(t, dir) {
				if e.CallID == callID {
					events = append(events, e.Kind+"/"+e.Status)
				}
			}
			if !ran || contains(strings.Join(events, ","), audit.KindCall+"/") || time.Now().After(end) {
				break
			}
		}
		got := step.Status + " | history " + strings.Join(history, ",") + " | audit " + strings.Join(events, ",")
		if v.Status == "cancelled" {
			cancelled++
		}
		switch {
		case cancelCode == http.StatusAccepted && v.Status != "cancelled",
			cancelCode == http.StatusConflict && v.Status == "cancelled":
			t.Errorf("round %d: cancel answered %d but the turn ended %s", round, cancelCode, v.Status)
		case ran:
			published++
			if step.Status != "succeeded" || strings.Join(history, ",") != "succeeded" ||
				!contains(strings.Join(events, ","), audit.KindCall+"/succeeded") || contains(strings.Join(events, ","), "not_executed") || contains(strings.Join(events, ","), audit.KindCancelled) {
				t.Errorf("round %d (approve first %v, %s apart; turn %s): published, but the record says %s", round, approveFirst, offset, v.Status, got)
			}
		default:
			notRun++
			if step.Status != "not_executed" || strings.Join(history, ",") != "not_executed" || contains(strings.Join(events, ","), audit.KindCall+"/") {
				t.Errorf("round %d (approve first %v, %s apart; turn %s): not published, but the record says %s", round, approveFirst, offset, v.Status, got)
			}
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d rounds: %d published, %d not run, %d turns cancelled", rounds, published, notRun, cancelled)
}

// GET on a turn and GET on its conversation tell the same story while a
// batch runs: a call whose outcome is stored (its sibling still runs, so
// nothing is appended yet) reads succeeded in both, the running one
// running in both.
func TestTurnAndConversationAgreeMidBatch(t *testing.T) {
	t.Parallel()
	slow, agentURL := startSlowAgent(t, time.Minute)
	slow.hold = make(chan struct{})
	m := &model{decide: func(req llm.Request) *llm.Response {
		if len(toolResults(req)) > 0 {
			return answer("both done")
		}
		return calls(call("a", "create_svg_artifact", map[string]any{"word": "Agree"}), call("b", "slow_echo", map[string]any{"text": "later"}))
	}}
	_, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{agentURL} })
	cid := c.newConversation()
	tid := c.send(cid, "two at once")
	var v wire.Turn
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if v = c.turn(cid, tid); stepOf(v, "create_svg_artifact") != nil && stepOf(v, "create_svg_artifact").Status == "succeeded" {
			break
		}
	}
	if s := stepOf(v, "create_svg_artifact"); s == nil || s.Status != "succeeded" || stepOf(v, "slow_echo") == nil || stepOf(v, "slow_echo").Status != "running" {
		t.Fatalf("turn steps = %+v, want the SVG succeeded and the echo running", v.Steps)
	}
	var conv struct {
		Turns []wire.Turn `json:"turns"`
	}
	c.do("GET", "/v1/conversations/"+cid, nil, &conv)
	if len(conv.Turns) != 1 {
		t.Fatalf("conversation turns = %d, want 1", len(conv.Turns))
	}
	got := conv.Turns[0]
	if s := stepOf(got, "create_svg_artifact"); s == nil || s.Status != "succeeded" || stepOf(got, "slow_echo") == nil || stepOf(got, "slow_echo").Status != "running" {
		t.Errorf("the conversation's turn steps = %+v, want them to agree with the turn's: SVG succeeded, echo running", got.Steps)
	}
	close(slow.hold)
	if v := c.wait(cid, tid); v.Status != "succeeded" {
		t.Errorf("turn = %s, want succeeded", v.Status)
	}
}
