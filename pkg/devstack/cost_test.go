package devstack

// Issue 16, cost per turn: each LLM call priced at its model's rates, the
// turn's cost and tokens in the Turn view, a budget in money (docs/design.md §10),
// and each step's timing, usage, arguments and result — what a waterfall
// of the turn shows — read from the API.

import (
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
	"github.com/clientagent/clientagent/pkg/turn"
)

func TestCostPerTurnAndBudget(t *testing.T) {
	t.Parallel()
	// $10 per 1M tokens in and out: the demo model's Popelnase turn costs
	// a few thousandths of a dollar.
	prices := llm.Prices{"scripted": {Input: 10, CachedInput: 1, Output: 10}}
	_, c := stack(t, scripted.Demo(), func(cfg *Config) { cfg.Prices = prices })
	cid := c.newConversation()
	v := c.wait(cid, c.send(cid, "Create a PNG image with the word Popelnase"))
	if v.Status != "succeeded" || v.CostUSD <= 0 {
		t.Fatalf("turn = %s costing $%v, want succeeded with its cost", v.Status, v.CostUSD)
	}
	var sumTokens int
	var sumCost float64
	var tools []string
	for _, s := range v.Steps {
		if s.Tool == "llm" {
			sumTokens += s.Tokens
			sumCost += float64(s.CostMicros) / 1e6
			continue
		}
		tools = append(tools, s.Tool)
		if s.Arguments == nil || len(s.Result) == 0 || s.EndedAt.Before(s.StartedAt) {
			t.Errorf("step %s = %+v, want its arguments, result and timing", s.Tool, s)
		}
	}
	if sumTokens != v.Tokens || sumCost < v.CostUSD*0.999 || sumCost > v.CostUSD*1.001 {
		t.Errorf("LLM steps sum to %d tokens $%.6f, the turn says %d tokens $%.6f", sumTokens, sumCost, v.Tokens, v.CostUSD)
	}
	if len(tools) != 2 {
		t.Errorf("tool steps = %v, want the SVG and the PNG", tools)
	}

	// A budget in money: the turn stops once its calls cost more.
	_, c2 := stack(t, scripted.Demo(), func(cfg *Config) {
		cfg.Prices = prices
		cfg.Limits = turn.DefaultLimits()
		cfg.Limits.CostBudget = int64(v.CostUSD * 1e6 / 3) // about one LLM call
	})
	cid2 := c2.newConversation()
	v2 := c2.wait(cid2, c2.send(cid2, "Create a PNG image with the word Popelnase"))
	if v2.Status != "failed" || !contains(v2.Reply, "budget of $") || v2.LLMCalls >= v.LLMCalls {
		t.Errorf("turn over its money budget = %s %q after %d calls, want it stopped with the budget's message", v2.Status, v2.Reply, v2.LLMCalls)
	}
}
