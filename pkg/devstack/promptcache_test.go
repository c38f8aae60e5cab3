package devstack

// Issue 18, a prompt layout the providers can cache: a multi-turn
// conversation through the local stack with the OpenAI provider talking to
// a scripted OpenAI-compatible model (openaitest) that records what it
// receives. The share is measured on the prompt as the provider reads it
// (the tools, then the messages, byte for byte): the part of each request
// equal to the start of the previous request of the conversation.

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm/openai"
	"github.com/clientagent/clientagent/pkg/llm/openai/openaitest"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
)

// cacheRun drives turns Popelnase turns through a stack whose model is the
// demo model behind the OpenAI wire, and returns the prompts received, in
// order, the number of messages of each, and the turn views' tokens.
func cacheRun(t *testing.T, turns int) (prompts []string, bodies [][]byte, tokens, cached int) {
	t.Helper()
	srv := openaitest.Start(t, scripted.Demo())
	_, c := stack(t, openai.New(openai.Config{BaseURL: srv.URL, Model: "gpt-4o-mini"}))
	cid := c.newConversation()
	for i := range turns {
		v := c.wait(cid, c.send(cid, "Create a PNG image with the word Popelnase"))
		if v.Status != "succeeded" {
			t.Fatalf("turn %d = %s %q", i+1, v.Status, v.Reply)
		}
		tokens += v.Tokens
		cached += v.CachedTokens
	}
	bodies = srv.Bodies()
	for _, b := range bodies {
		p, err := openaitest.Prompt(b)
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p)
	}
	return prompts, bodies, tokens, cached
}

var artifactID = regexp.MustCompile(`art_[0-9a-f]+`)

// Issue 18 acceptance: from the 3rd request on, each request starts with
// at least 95% of the previous one while the 80-entry window is not full,
// and every request after the first artifact still names that artifact.
// Once the window slides, the start changes only at a step: the window is
// cut a quarter of the window at a time (record.LLMWindow), so most
// requests still share the previous one's start.
func TestPromptStartsWithThePreviousRequest(t *testing.T) {
	t.Parallel()
	prompts, bodies, tokens, cached := cacheRun(t, 20)
	first := ""
	windowFull := -1
	var slid, slidLow int
	for i := 1; i < len(prompts); i++ {
		share := float64(openaitest.CommonPrefix(prompts[i], prompts[i-1])) / float64(len(prompts[i-1]))
		start := firstUserMessage(bodies[i])
		if i == 1 {
			first = firstUserMessage(bodies[0])
		}
		if windowFull < 0 && start != first {
			windowFull = i
		}
		switch {
		case windowFull < 0 && i >= 2 && share < 0.95:
			t.Errorf("request %d starts with %.1f%% of request %d, want at least 95%% before the window is full", i+1, 100*share, i)
		case windowFull >= 0:
			slid++
			if share < 0.95 {
				slidLow++
			}
		}
		if first := firstArtifact(bodies); first != "" && i > firstArtifactRequest(bodies) && !strings.Contains(string(bodies[i]), first) {
			t.Errorf("request %d does not name the first artifact %s", i+1, first)
		}
	}
	if windowFull < 0 {
		t.Fatalf("the window never filled in %d requests: make the conversation longer", len(prompts))
	}
	if slidLow*4 > slid {
		t.Errorf("past the full window %d of %d requests share less than 95%% of the previous start, want the cut to move in steps", slidLow, slid)
	}
	if cached == 0 || cached >= tokens {
		t.Errorf("turns counted %d cached of %d tokens, want the provider's cached tokens recorded", cached, tokens)
	}
}

// firstUserMessage is the first user message of a request body, as sent.
func firstUserMessage(body []byte) string {
	i := strings.Index(string(body), `"role":"user"`)
	if i < 0 {
		return ""
	}
	return string(body[i:min(len(body), i+200)])
}

func firstArtifact(bodies [][]byte) string {
	for _, b := range bodies {
		if m := artifactID.FindString(string(b)); m != "" {
			return m
		}
	}
	return ""
}

func firstArtifactRequest(bodies [][]byte) int {
	for i, b := range bodies {
		if artifactID.Match(b) {
			return i
		}
	}
	return len(bodies)
}

// TestPromptCacheFigures prints the figures of docs/benchmarks.md
// ("A prompt the providers can cache") when CLIENTAGENT_CACHE_FIGURES is
// set: the share of each request's start equal to the previous request's,
// over 20 turns and past the full window, and the input tokens per turn
// billed at the full price.
func TestPromptCacheFigures(t *testing.T) {
	if os.Getenv("CLIENTAGENT_CACHE_FIGURES") == "" {
		t.Skip("set CLIENTAGENT_CACHE_FIGURES=1 to print the prompt-cache figures")
	}
	const turns = 30
	prompts, _, _, _ := cacheRun(t, turns)
	perTurn := len(prompts) / turns
	var shares []float64
	fresh := make([]int, turns) // characters not served from the start of the previous request
	for i := range prompts {
		common := 0
		if i > 0 {
			common = openaitest.CommonPrefix(prompts[i], prompts[i-1])
			shares = append(shares, float64(common)/float64(len(prompts[i-1])))
		}
		fresh[i/perTurn] += len(prompts[i]) - common
	}
	fmt.Printf("requests %d (%d per turn)\n", len(prompts), perTurn)
	for tn := range turns {
		lo, hi := 1.0, 0.0
		for i := tn * perTurn; i < (tn+1)*perTurn; i++ {
			if i == 0 {
				continue
			}
			lo, hi = min(lo, shares[i-1]), max(hi, shares[i-1])
		}
		fmt.Printf("turn %2d: share %.1f%%–%.1f%%, prompt %6d chars, fresh input ≈ %5d tokens\n", tn+1, 100*lo, 100*hi, len(prompts[(tn+1)*perTurn-1]), fresh[tn]/4)
	}
}
