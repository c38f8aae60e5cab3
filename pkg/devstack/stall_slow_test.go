//go:build slow

package devstack

// The slow suite (README, "Tests"): faults that take real minutes. CI runs
// it with `make test-slow`.

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/valkeytest"
	"github.com/clientagent/clientagent/pkg/wire"
)

// A store that stalls (kill -STOP of the redis-server) for 30 s, or for
// CLIENTAGENT_STALL_SECONDS, while five turns run: no turn fails. The
// steps wait for the store in process and the state machine's retries
// cover as long again (docs/architecture.md, "Bad days"); when the store is
// back every turn goes on and succeeds, each specialist having run once.
func TestSlowStoreStallNeverFailsARunningTurn(t *testing.T) {
	stall := 30 * time.Second
	if s, err := strconv.Atoi(os.Getenv("CLIENTAGENT_STALL_SECONDS")); err == nil && s > 0 {
		stall = time.Duration(s) * time.Second
	}
	addr, proc := valkeytest.Server(t)
	slow, agentURL := startSlowAgent(t, 1500*time.Millisecond)
	m := &model{decide: func(req llm.Request) *llm.Response {
		if len(toolResults(req)) > 0 {
			return answer("done after the stall")
		}
		return calls(call("x1", "slow_echo", map[string]any{"text": "hold on"}))
	}}
	_, c := stack(t, m, func(cfg *Config) {
		cfg.ValkeyURL = "redis://" + addr + "/0"
		cfg.Agents = []string{agentURL}
	})
	const turns = 5
	cids, tids := make([]string, turns), make([]string, turns)
	for i := range turns {
		cids[i] = c.newConversation()
		tids[i] = c.send(cids[i], "echo slowly")
	}
	for i := range turns {
		c.waitRunning(cids[i], tids[i], "slow_echo")
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stall) // the fault itself: the store answers nothing for this long
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for i := range turns {
		// A step may be between two of the state machine's retries
		// (at most 10 s apart) when the store comes back.
		var v wire.Turn
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if v = c.turn(cids[i], tids[i]); v.Status != "running" {
				break
			}
		}
		if v.Status != "succeeded" || v.Reply != "done after the stall" {
			t.Errorf("turn %d after a %s stall = %s %q, want succeeded", i, stall, v.Status, v.Reply)
		}
	}
	slow.mu.Lock()
	runs := len(slow.runs)
	slow.mu.Unlock()
	if runs != turns {
		t.Errorf("the specialist ran %d times for %d calls, want once each", runs, turns)
	}
}
