package devstack

// End-to-end tests of issue 4: every one goes through the HTTP API, the
// turn state machine on the local engine, Valkey and A2A specialists.

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/turn"
	"github.com/clientagent/clientagent/pkg/wire"
)

// Scenario 1 (docs/design.md §2): "Create a PNG image with the word Popelnase" chains
// create_svg_artifact → convert_svg_to_png → answer in exactly 3 LLM calls.
func TestPopelnase(t *testing.T) {
	t.Parallel()
	m := &model{decide: func(req llm.Request) *llm.Response {
		for _, r := range toolResults(req) {
			arts, _ := r["artifacts"].([]any)
			if len(arts) == 0 {
				return answer("failed: " + r["error"].(string))
			}
			a := arts[0].(map[string]any)
			if a["mime_type"] == "image/svg+xml" {
				return calls(call("c2", "convert_svg_to_png", map[string]any{"artifact_id": a["artifact_id"]}))
			}
			return answer("Here is the PNG image with the word Popelnase: " + a["artifact_id"].(string))
		}
		return calls(call("c1", "create_svg_artifact", map[string]any{"word": "Popelnase"}))
	}}
	_, c := stack(t, m)
	cid := c.newConversation()
	v := c.wait(cid, c.send(cid, "Create a PNG image with the word Popelnase"))
	if v.Status != "succeeded" {
		t.Fatalf("status = %s (%s), want succeeded", v.Status, v.Reply)
	}
	if v.LLMCalls != 3 || len(m.requests()) != 3 {
		t.Errorf("llm_calls = %d (provider saw %d), want 3", v.LLMCalls, len(m.requests()))
	}
	var pngRef string
	for _, a := range v.Artifacts {
		if a.MimeType == "image/png" {
			pngRef = a.ID
		}
	}
	if pngRef == "" {
		t.Fatalf("artifacts = %+v, want a PNG", v.Artifacts)
	}
	img := c.downloadPNG(cid, pngRef)
	if ink := inkFraction(img); ink < 0.02 || ink > 0.6 {
		t.Errorf("ink fraction = %.3f, want the word drawn (between 2%% and 60%%)", ink)
	}
}

func (c *client) downloadPNG(cid, aid string) image.Image {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.base+"/v1/conversations/"+cid+"/artifacts/"+aid, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
		c.t.Fatalf("GET artifact = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		c.t.Fatalf("decode PNG: %v", err)
	}
	return img
}

// inkFraction is the share of pixels noticeably darker than the background.
func inkFraction(img image.Image) float64 {
	b := img.Bounds()
	bg := lum(img, b.Min.X, b.Min.Y)
	var ink, all int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			all++
			if d := lum(img, x, y) - bg; d > 0.3 || d < -0.3 {
				ink++
			}
		}
	}
	return float64(ink) / float64(all)
}

func lum(img image.Image, x, y int) float64 {
	r, g, b, a := img.At(x, y).RGBA()
	if a == 0 {
		return 1 // transparent counts as a white background
	}
	return (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(b)) / 65535
}

// Scenario 2 (docs/design.md §3.3): three independent calls in one assistant message
// run concurrently and their results come back in call order; a failing
// specialist is a failed result, not a failed turn.
func TestParallelCallsInCallOrder(t *testing.T) {
	t.Parallel()
	agent, url := startSlowAgent(t, 400*time.Millisecond)
	var order []string
	m := &model{decide: func(req llm.Request) *llm.Response {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleTool {
			for _, msg := range req.Messages {
				if msg.Role == llm.RoleTool {
					order = append(order, msg.ToolCallID)
				}
			}
			return answer("done")
		}
		return calls(call("a", "slow_echo", map[string]any{"text": "one"}), call("b", "slow_echo", map[string]any{"text": "boom"}), call("c", "slow_echo", map[string]any{"text": "three"}))
	}}
	_, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{url} })
	cid := c.newConversation()
	v := c.wait(cid, c.send(cid, "echo three things"))
	if v.Status != "succeeded" {
		t.Fatalf("status = %s (%s), want succeeded", v.Status, v.Reply)
	}
	if strings.Join(order, ",") != "a,b,c" {
		t.Errorf("result order = %v, want a,b,c", order)
	}
	results := toolResults(m.requests()[1])
	if results["b"]["status"] != "failed" || !strings.Contains(results["b"]["error"].(string), "echo chamber collapsed") {
		t.Errorf("result b = %v, want failed with the agent's message", results["b"])
	}
	agent.mu.Lock()
	runs := append([]span(nil), agent.runs...)
	agent.mu.Unlock()
	if len(runs) != 3 {
		t.Fatalf("agent ran %d times, want 3", len(runs))
	}
	latestStart, earliestEnd := runs[0].start, runs[0].end
	for _, r := range runs[1:] {
		if r.start.After(latestStart) {
			latestStart = r.start
		}
		if r.end.Before(earliestEnd) {
			earliestEnd = r.end
		}
	}
	if !latestStart.Before(earliestEnd) {
		t.Errorf("the three calls did not overlap: they ran one after another")
	}
}

// flangeModel asks for a flange without the user-input field material.
func flangeModel() *model {
	return &model{decide: func(req llm.Request) *llm.Response {
		for _, r := range toolResults(req) {
			return answer("Flange result: " + r["status"].(string))
		}
		return calls(call("f1", "design_valve_flange", map[string]any{"holes": 4, "outer_diameter_mm": 120}))
	}}
}

// Scenario 3 (docs/design.md §3.3): a missing user-input field pauses with a typed
// form; the answer is validated and the call runs; a second answer is 409.
func TestFormRoundTrip(t *testing.T) {
	t.Parallel()
	m := flangeModel()
	_, c := stack(t, m)
	cid := c.newConversation()
	tid := c.send(cid, "Design a valve flange with 4 holes")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) != 1 {
		t.Fatalf("turn = %+v, want awaiting_input with one form", v)
	}
	f := v.Form.Calls[0]
	if f.Tool != "design_valve_flange" || len(f.Fields) != 1 || f.Fields[0].Name != "material" || len(f.Fields[0].Enum) == 0 {
		t.Fatalf("form = %+v, want the material field with its enum", f)
	}
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{f.CallID: map[string]any{"material": "unobtainium"}}}); code != http.StatusBadRequest {
		t.Errorf("invalid answer = %d, want 400", code)
	}
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{f.CallID: map[string]any{"material": "steel"}}}); code != http.StatusAccepted {
		t.Fatalf("answer = %d, want 202", code)
	}
	v = c.wait(cid, tid)
	if v.Status != "succeeded" || len(v.Artifacts) == 0 {
		t.Fatalf("turn = %s %q, artifacts %v; want succeeded with a drawing", v.Status, v.Reply, v.Artifacts)
	}
	// Issue 28: the second answer is told it came second, in those words.
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if code := c.do("POST", "/v1/conversations/"+cid+"/turns/"+tid+"/input", map[string]any{"answers": map[string]any{f.CallID: map[string]any{"material": "brass"}}}, &e); code != http.StatusConflict || !strings.Contains(e.Error.Message, "already answered") {
		t.Errorf("second answer = %d %+v, want 409 saying already answered", code, e)
	}
	// Issue 28: the turn keeps what the user answered, for a reload.
	if len(v.Answers) != 1 || v.Answers[0].Kind != "form" || v.Answers[0].Values[f.CallID]["material"] != "steel" {
		t.Errorf("answers = %+v, want the one form answer material: steel", v.Answers)
	}
	// docs/design.md §3.5: the result tells the model the user supplied material.
	r := toolResults(m.requests()[1])["f1"]
	if src, _ := r["input_sources"].(map[string]any); src["material"] != "user" {
		t.Errorf("input_sources = %v, want material from the user", r["input_sources"])
	}
}

// publishModel creates an SVG, then publishes it (requires approval).
func publishModel() *model {
	return &model{decide: func(req llm.Request) *llm.Response {
		res := toolResults(req)
		if r, ok := res["p1"]; ok {
			return answer("publish: " + r["status"].(string))
		}
		if r, ok := res["s1"]; ok {
			a := r["artifacts"].([]any)[0].(map[string]any)
			return calls(call("p1", "publish_artifact", map[string]any{"artifact_id": a["artifact_id"], "channel": "web"}))
		}
		return calls(call("s1", "create_svg_artifact", map[string]any{"word": "Hello"}))
	}}
}

// Scenario 4 (docs/design.md §3.3, docs/design.md §8): approve runs the call once; reject
// sends a rejected result to the model and nothing runs; another user's
// approval is 404.
func TestApproval(t *testing.T) {
	t.Parallel()
	for _, decision := range []string{"approve", "reject"} {
		t.Run(decision, func(t *testing.T) {
			t.Parallel()
			m := publishModel()
			dir := t.TempDir()
			st, c := stack(t, m, func(cfg *Config) { cfg.DataDir = dir })
			cid := c.newConversation()
			tid := c.send(cid, "Make a Hello SVG and publish it to web")
			v := c.wait(cid, tid)
			if v.Status != "awaiting_approval" || v.Approval == nil || v.Approval.Calls[0].Arguments["channel"] != "web" {
				t.Fatalf("turn = %+v, want awaiting_approval showing the arguments", v)
			}
			if code := c.as("mallory", st).input(cid, tid, map[string]any{"approval": map[string]any{"id": v.Approval.ID, "decision": "approve"}}); code != http.StatusNotFound {
				t.Errorf("another user's approval = %d, want 404", code)
			}
			note := "checked by " + decision
			if code := c.decide(cid, tid, decision, map[string]any{"note": note}); code != http.StatusAccepted {
				t.Fatalf("decision = %d, want 202", code)
			}
			v = c.wait(cid, tid)
			if v.Status != "succeeded" {
				t.Fatalf("status = %s (%s), want succeeded", v.Status, v.Reply)
			}
			// Issue 28: the decision and its note are the turn's, for a reload.
			if len(v.Answers) != 1 || v.Answers[0].Kind != "approval" || v.Answers[0].Decision != decision || v.Answers[0].Note != note || len(v.Answers[0].Edited) != 0 {
				t.Errorf("answers = %+v, want one %s with note %q and no edit", v.Answers, decision, note)
			}
			want, wantReply := 1, "publish: succeeded"
			if decision == "reject" {
				want, wantReply = 0, "publish: rejected"
			}
			if got := len(st.Publications.List()); got != want {
				t.Errorf("publications = %d, want %d", got, want)
			}
			if v.Reply != wantReply {
				t.Errorf("reply = %q, want %q", v.Reply, wantReply)
			}
			// docs/design.md §8: the decision, and what ran, are in the durable audit log.
			wantEvents := []string{"publish_artifact/approved", "publish_artifact/call"}
			if decision == "reject" {
				wantEvents = []string{"publish_artifact/rejected"}
			}
			if got := auditEvents(t, dir, "publish_artifact"); strings.Join(got, ",") != strings.Join(wantEvents, ",") {
				t.Errorf("audit = %v, want %v", got, wantEvents)
			}
		})
	}
}

// A short yes to a pending approval is the decision (docs/api/openapi.yaml).
func TestYesRepliesToApproval(t *testing.T) {
	t.Parallel()
	st, c := stack(t, publishModel())
	cid := c.newConversation()
	tid := c.send(cid, "Make a Hello SVG and publish it to web")
	if v := c.wait(cid, tid); v.Status != "awaiting_approval" {
		t.Fatalf("status = %s, want awaiting_approval", v.Status)
	}
	if got := c.send(cid, "yes"); got != tid {
		t.Errorf("yes started turn %s, want it to answer %s", got, tid)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" || len(st.Publications.List()) != 1 {
		t.Errorf("status = %s, publications %d; want succeeded and 1", v.Status, len(st.Publications.List()))
	}
}

// Scenario 5 (docs/api/openapi.yaml, docs/design.md §3.4): new free text while a form waits
// supersedes the waiting turn; the new turn runs.
func TestSupersede(t *testing.T) {
	t.Parallel()
	m := &model{decide: func(req llm.Request) *llm.Response {
		if strings.Contains(lastUser(req), "flange") {
			if len(toolResults(req)) > 0 {
				return answer("flange done")
			}
			return calls(call("f1", "design_valve_flange", map[string]any{"holes": 4, "outer_diameter_mm": 120}))
		}
		return answer("hello there")
	}}
	_, c := stack(t, m)
	cid := c.newConversation()
	t1 := c.send(cid, "Design a valve flange with 4 holes")
	if v := c.wait(cid, t1); v.Status != "awaiting_input" {
		t.Fatalf("status = %s, want awaiting_input", v.Status)
	}
	t2 := c.send(cid, "never mind, just say hello")
	if v := c.wait(cid, t2); v.Status != "succeeded" || v.Reply != "hello there" {
		t.Fatalf("new turn = %s %q, want succeeded", v.Status, v.Reply)
	}
	if v := c.wait(cid, t1); v.Status != "superseded" {
		t.Errorf("old turn = %s, want superseded", v.Status)
	}
	if code := c.input(cid, t1, map[string]any{"answers": map[string]any{"call_" + t1 + "_1": map[string]any{"material": "steel"}}}); code != http.StatusConflict {
		t.Errorf("answer to superseded turn = %d, want 409", code)
	}
	// The superseded call reaches the model as not_executed (docs/design.md §3.4a).
	reqs := m.requests()
	assertProviderValid(t, reqs[len(reqs)-1].Messages)
	found := false
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == llm.RoleTool && msg.ToolCallID == "f1" && strings.Contains(msg.Content, "not_executed") {
			found = true
		}
	}
	if !found {
		t.Errorf("transcript lacks the not_executed result of f1")
	}
}

// Scenario 6 (docs/design.md §9, docs/design.md §8): a pending approval left alone expires.
func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	st, c := stack(t, publishModel(), func(cfg *Config) {
		cfg.Limits = turn.DefaultLimits()
		cfg.Limits.AwaitTimeout = time.Second
	})
	cid := c.newConversation()
	tid := c.send(cid, "Make a Hello SVG and publish it to web")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_approval" {
		t.Fatalf("status = %s, want awaiting_approval", v.Status)
	}
	deadline := time.Now().Add(60 * time.Second)
	for v.Status == "awaiting_approval" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		v = c.turn(cid, tid)
	}
	if v.Status != "expired" || !strings.Contains(v.Reply, "expired") {
		t.Fatalf("turn = %s %q, want expired with a message", v.Status, v.Reply)
	}
	if n := len(st.Publications.List()); n != 0 {
		t.Errorf("publications = %d, want 0", n)
	}
	if code := c.input(cid, tid, map[string]any{"approval": map[string]any{"id": "ap_any", "decision": "approve"}}); code != http.StatusConflict {
		t.Errorf("late approval = %d, want 409", code)
	}
}

// Scenario 7 (docs/design.md §3.6, docs/design.md §10): a model that never stops fails the turn
// after 12 LLM calls; the same call repeated is stopped earlier.
//
// Issue 14: a limit ends the turn, not the execution. The turn reads
// failed with its message, while the execution succeeds: only faults fail
// executions (and fire the alarm on failed executions).
func TestLimits(t *testing.T) {
	t.Parallel()
	executionSucceeded := func(st *Stack, tid string) {
		t.Helper()
		h, err := st.history(t.Context(), tid)
		if err != nil {
			t.Fatalf("history(%s) = %v", tid, err)
		}
		if last := h[len(h)-1].Type; last != "ExecutionSucceeded" {
			t.Errorf("turn %s: execution ended with %s, want ExecutionSucceeded", tid, last)
		}
		arn := strings.Replace(st.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + tid
		if ex, err := st.Engine.DescribeExecution(t.Context(), arn); err != nil || ex.Status != "SUCCEEDED" {
			t.Errorf("turn %s: execution status %s (%v), want SUCCEEDED", tid, ex.Status, err)
		}
	}
	n := 0
	endless := &model{decide: func(req llm.Request) *llm.Response {
		n++
		return calls(call("w", "create_svg_artifact", map[string]any{"word": "again" + strings.Repeat("!", n)}))
	}}
	st, c := stack(t, endless)
	cid := c.newConversation()
	tid := c.send(cid, "loop forever")
	v := c.wait(cid, tid)
	if v.Status != "failed" || v.LLMCalls != 12 || !strings.Contains(v.Reply, "12") {
		t.Errorf("endless: status %s, llm_calls %d, reply %q; want failed after 12 with a message", v.Status, v.LLMCalls, v.Reply)
	}
	executionSucceeded(st, tid)

	same := &model{decide: func(req llm.Request) *llm.Response {
		return calls(call("s", "create_svg_artifact", map[string]any{"word": "same"}))
	}}
	st2, c2 := stack(t, same)
	cid2 := c2.newConversation()
	tid2 := c2.send(cid2, "repeat yourself")
	v = c2.wait(cid2, tid2)
	if v.Status != "failed" || v.LLMCalls != 3 || !strings.Contains(v.Reply, "no progress") {
		t.Errorf("repeat: status %s, llm_calls %d, reply %q; want failed by no-progress at the third call", v.Status, v.LLMCalls, v.Reply)
	}
	executionSucceeded(st2, tid2)

	empty := &model{decide: func(llm.Request) *llm.Response { return answer("   ") }}
	st3, c3 := stack(t, empty)
	cid3 := c3.newConversation()
	tid3 := c3.send(cid3, "say nothing")
	v = c3.wait(cid3, tid3)
	if v.Status != "failed" || !strings.Contains(v.Reply, "empty") {
		t.Errorf("empty answer: status %s reply %q, want failed", v.Status, v.Reply)
	}
	executionSucceeded(st3, tid3)
}

// Scenario 8 (docs/design.md §3.3): unknown tool, malformed JSON, schema violation and
// unknown artifact id become error results; the model corrects itself.
func TestBadCallsBecomeErrorResults(t *testing.T) {
	t.Parallel()
	var errs map[string]map[string]any
	m := &model{decide: func(req llm.Request) *llm.Response {
		res := toolResults(req)
		switch {
		case res["ok"] != nil:
			return answer("fixed it")
		case len(res) > 0:
			errs = res
			return calls(call("ok", "create_svg_artifact", map[string]any{"word": "fixed"}))
		}
		return calls(
			call("u", "make_coffee", map[string]any{}),
			llm.ToolCall{ID: "j", Name: "create_svg_artifact", Arguments: `{"word": "bro`, ArgumentsError: "unexpected end of JSON input"},
			call("s", "create_svg_artifact", map[string]any{"word": 42}),
			call("a", "convert_svg_to_png", map[string]any{"artifact_id": "art_doesnotexist"}),
		)
	}}
	_, c := stack(t, m)
	cid := c.newConversation()
	v := c.wait(cid, c.send(cid, "do four wrong things"))
	if v.Status != "succeeded" || v.Reply != "fixed it" {
		t.Fatalf("status = %s %q, want succeeded", v.Status, v.Reply)
	}
	for _, id := range []string{"u", "j", "s", "a"} {
		if errs[id]["status"] != "failed" || errs[id]["error"] == nil {
			t.Errorf("result %s = %v, want a failed result with an error", id, errs[id])
		}
	}
	if !strings.Contains(errs["u"]["error"].(string), "make_coffee") || !strings.Contains(errs["a"]["error"].(string), "art_doesnotexist") {
		t.Errorf("errors do not name what was wrong: %v / %v", errs["u"]["error"], errs["a"]["error"])
	}
}

// Scenario 9 (docs/design.md §3.4a, docs/design.md §4): two turns started back to back on one
// conversation both succeed, and a third turn's transcript is valid.
func TestConcurrentTurns(t *testing.T) {
	t.Parallel()
	_, url := startSlowAgent(t, 200*time.Millisecond)
	m := &model{decide: func(req llm.Request) *llm.Response {
		u := lastUser(req)
		if len(toolResults(req)) > 0 || strings.Contains(u, "third") {
			return answer("ok: " + u)
		}
		return calls(call("e-"+strings.Fields(u)[0], "slow_echo", map[string]any{"text": u}))
	}}
	_, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{url} })
	cid := c.newConversation()
	t1 := c.send(cid, "first request")
	t2 := c.send(cid, "second request")
	for _, tid := range []string{t1, t2} {
		if v := c.wait(cid, tid); v.Status != "succeeded" {
			t.Fatalf("turn %s = %s %q, want succeeded", tid, v.Status, v.Reply)
		}
	}
	t3 := c.send(cid, "third request")
	if v := c.wait(cid, t3); v.Status != "succeeded" {
		t.Fatalf("third = %s", v.Status)
	}
	for _, req := range m.requests() {
		assertProviderValid(t, req.Messages)
	}
	reqs := m.requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 9 || last[len(last)-1].Content != "third request" {
		t.Errorf("third turn's view = %d messages ending %q; want both earlier turns (4 each) then its own request", len(last), last[len(last)-1].Content)
	}
	var conv struct {
		History []json.RawMessage `json:"history"`
	}
	c.do("GET", "/v1/conversations/"+cid, nil, &conv)
	if len(conv.History) < 7 {
		t.Errorf("history has %d entries, want every turn's messages", len(conv.History))
	}
}

// Issue 4: the Map's concurrency comes from configuration
// (CLIENTAGENT_MAX_CONCURRENCY): with 1, the calls of a batch run one at a
// time, still in call order.
func TestMaxConcurrencyFromConfig(t *testing.T) {
	t.Parallel()
	agent, url := startSlowAgent(t, 150*time.Millisecond)
	m := &model{decide: func(req llm.Request) *llm.Response {
		if len(toolResults(req)) > 0 {
			return answer("done")
		}
		return calls(call("a", "slow_echo", map[string]any{"text": "1"}), call("b", "slow_echo", map[string]any{"text": "2"}), call("c", "slow_echo", map[string]any{"text": "3"}))
	}}
	_, c := stack(t, m, func(cfg *Config) {
		cfg.Agents = []string{url}
		cfg.Limits = turn.DefaultLimits()
		cfg.Limits.MaxConcurrency = 1
	})
	cid := c.newConversation()
	if v := c.wait(cid, c.send(cid, "one at a time")); v.Status != "succeeded" {
		t.Fatalf("status = %s", v.Status)
	}
	agent.mu.Lock()
	defer agent.mu.Unlock()
	for i := 1; i < len(agent.runs); i++ {
		if agent.runs[i].start.Before(agent.runs[i-1].end) {
			t.Errorf("call %d started before call %d ended: MaxConcurrency 1 not honoured", i, i-1)
		}
	}
}

// auditEvents lists the audit log's "tool/kind" entries for tool, sorted.
func auditEvents(t *testing.T, dataDir, tool string) []string {
	t.Helper()
	var out []string
	for _, e := range auditLog(t, dataDir) {
		if e.Tool == tool {
			out = append(out, e.Tool+"/"+e.Kind)
		}
	}
	sort.Strings(out)
	return out
}

// Issue 28: of two answers sent at once (two tabs, a double click), one
// runs and the other is told the turn was already answered.
func TestDoubleSubmitSaysAlreadyAnswered(t *testing.T) {
	t.Parallel()
	st, c := stack(t, publishModel())
	cid := c.newConversation()
	tid := c.send(cid, "Make a Hello SVG and publish it to web")
	v := c.wait(cid, tid)
	if v.Approval == nil {
		t.Fatalf("turn = %+v, want an approval", v)
	}
	body := map[string]any{"approval": map[string]any{"id": v.Approval.ID, "decision": "approve"}}
	type result struct {
		code int
		msg  string
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			code := c.do("POST", "/v1/conversations/"+cid+"/turns/"+tid+"/input", body, &e)
			results <- result{code, e.Error.Message}
		}()
	}
	a, b := <-results, <-results
	if a.code == http.StatusConflict {
		a, b = b, a
	}
	if a.code != http.StatusAccepted || b.code != http.StatusConflict || !strings.Contains(b.msg, "already answered") {
		t.Errorf("answers = %+v and %+v, want one 202 and one 409 saying already answered", a, b)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" || len(st.Publications.List()) != 1 {
		t.Errorf("turn = %s with %d publications, want succeeded with one", v.Status, len(st.Publications.List()))
	}
}

// Issue 28: edit and resend, or regenerate, the last message. A message
// with supersedes replaces the newest ended turn in the model's window
// (the replaced turn is left out, now and later), the history keeps it
// and its Turn says superseded_by; only the newest ended turn can be
// replaced.
func TestSupersedesTheLastTurn(t *testing.T) {
	t.Parallel()
	m := &model{decide: func(req llm.Request) *llm.Response { return answer("answer to " + lastUser(req)) }}
	_, c := stack(t, m)
	cid := c.newConversation()
	first := c.send(cid, "the first wording")
	if v := c.wait(cid, first); v.Status != "succeeded" {
		t.Fatalf("first turn = %s", v.Status)
	}
	var res struct {
		TurnID string `json:"turn_id"`
	}
	msgs := "/v1/conversations/" + cid + "/messages"
	if code := c.do("POST", msgs, map[string]any{"text": "the edited wording", "supersedes": first}, &res); code != http.StatusAccepted {
		t.Fatalf("resend = %d, want 202", code)
	}
	v := c.wait(cid, res.TurnID)
	if v.Status != "succeeded" || v.Supersedes != first {
		t.Fatalf("resent turn = %s supersedes %q, want succeeded superseding %s", v.Status, v.Supersedes, first)
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := c.do("POST", msgs, map[string]any{"text": "again", "supersedes": first}, &e); code != http.StatusConflict || e.Error.Code != "not_last_turn" {
		t.Errorf("superseding an older turn = %d %s, want 409 not_last_turn", code, e.Error.Code)
	}
	third := c.send(cid, "a follow-up")
	c.wait(cid, third)
	for i, req := range m.requests()[1:] {
		for _, msg := range req.Messages {
			if contains(msg.Content, "first wording") {
				t.Errorf("request %d after the resend still has the replaced turn: %q", i+1, msg.Content)
			}
		}
	}
	last := m.requests()[len(m.requests())-1]
	if !slices.ContainsFunc(last.Messages, func(msg llm.Message) bool { return msg.Content == "answer to the edited wording" }) {
		t.Errorf("the follow-up's window lacks the resent turn: %+v", last.Messages)
	}
	var conv struct {
		History []struct{ Content string } `json:"history"`
		Turns   []wire.Turn                `json:"turns"`
	}
	c.do("GET", "/v1/conversations/"+cid, nil, &conv)
	if len(conv.Turns) != 3 || conv.Turns[0].SupersededBy != res.TurnID || !slices.ContainsFunc(conv.History, func(h struct{ Content string }) bool { return h.Content == "the first wording" }) {
		t.Errorf("conversation = %+v, want the replaced turn kept, superseded by %s", conv, res.TurnID)
	}
	// The turn's own read knows it too, after the replacing turn ended.
	if v := c.turn(cid, first); v.SupersededBy != res.TurnID {
		t.Errorf("GET of the replaced turn: superseded_by = %q, want %s", v.SupersededBy, res.TurnID)
	}
}

// Issue 28: the LLM call inspector. With content capture on (the traces'
// switch), each LLM step keeps the messages sent, the tools offered and the
// raw response; with it off, nothing of the kind is kept; another user
// cannot read the turn at all.
func TestLLMInspectorFollowsTheCaptureSwitch(t *testing.T) {
	t.Parallel()
	for _, capture := range []bool{true, false} {
		tr := telemetry.Disabled()
		tr.CaptureContent = capture
		st, c := stack(t, nil, func(cfg *Config) { cfg.Tracing = tr })
		cid := c.newConversation()
		tid := c.send(cid, "Create an SVG with the word Inspect")
		v := c.wait(cid, tid)
		var llmSteps []record.Step
		for _, s := range v.Steps {
			if s.Tool == "llm" {
				llmSteps = append(llmSteps, s)
			}
		}
		if len(llmSteps) != 2 {
			t.Fatalf("capture %v: LLM steps = %+v, want 2", capture, llmSteps)
		}
		raw := llmSteps[0].Inspect
		var in *record.LLMInspect
		if raw != nil {
			if err := json.Unmarshal(raw, &in); err != nil {
				t.Fatalf("inspect %s: %v", raw, err)
			}
		}
		switch {
		case !capture && in != nil:
			t.Errorf("capture off: the step kept %+v", in)
		case capture && (in == nil || !slices.ContainsFunc(in.Messages, func(m llm.Message) bool { return contains(m.Content, "word Inspect") }) ||
			!slices.Contains(in.Tools, "create_svg_artifact") || len(in.Response.ToolCalls) != 1 || in.Response.Usage.Total() == 0):
			t.Errorf("capture on: inspect = %+v, want the messages, the tools and the raw response", in)
		}
		if code := c.as("mallory", st).do("GET", "/v1/conversations/"+cid+"/turns/"+tid, nil, nil); code != http.StatusNotFound {
			t.Errorf("another user's read = %d, want 404", code)
		}
	}
}
