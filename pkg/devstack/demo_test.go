package devstack

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
)

// historyOf returns the conversation's history entries.
func (c *client) historyOf(cid string) []map[string]any {
	c.t.Helper()
	var conv struct {
		History []map[string]any `json:"history"`
	}
	if code := c.do("GET", "/v1/conversations/"+cid, nil, &conv); code != http.StatusOK {
		c.t.Fatalf("GET conversation = %d", code)
	}
	return conv.History
}

// docs/design.md §3.5: "redo the valve with 6 holes" starts from the newest successful
// inputs of design_valve_flange (recent_skill_inputs), so the material the
// user gave in the first turn is not asked again. Demo model, demo agents.
func TestRedoValveFromRecentInputs(t *testing.T) {
	t.Parallel()
	_, c := stack(t, nil)
	cid := c.newConversation()
	t1 := c.send(cid, "Design a valve flange with 4 holes")
	v := c.wait(cid, t1)
	if v.Status != "awaiting_input" || v.Form == nil {
		t.Fatalf("first turn = %s, want awaiting_input", v.Status)
	}
	callID := v.Form.Calls[0].CallID
	if code := c.input(cid, t1, map[string]any{"answers": map[string]any{callID: map[string]any{"material": "brass"}}}); code != http.StatusAccepted {
		t.Fatalf("answer = %d", code)
	}
	if v = c.wait(cid, t1); v.Status != "succeeded" {
		t.Fatalf("first turn = %s %q", v.Status, v.Reply)
	}
	t2 := c.send(cid, "Redo the valve with 6 holes")
	if v = c.wait(cid, t2); v.Status != "succeeded" {
		t.Fatalf("redo turn = %s %q (form %+v), want succeeded without asking again", v.Status, v.Reply, v.Form)
	}
	var inputs map[string]any
	for _, e := range c.historyOf(cid) {
		if e["turn_id"] == t2 && e["tool"] == "design_valve_flange" && e["status"] == "succeeded" {
			inputs, _ = e["tool_inputs"].(map[string]any)
		}
	}
	if inputs["material"] != "brass" || inputs["holes"] != float64(6) {
		t.Errorf("redo inputs = %v, want material brass and 6 holes", inputs)
	}
}

// Issue 5: a specialist's input-required becomes a form; its answer
// continues the same A2A task, which then completes (demo flange agent).
func TestSpecialistInputRequired(t *testing.T) {
	t.Parallel()
	m := &model{decide: func(req llm.Request) *llm.Response {
		if r, ok := toolResults(req)["g1"]; ok {
			return answer("flange: " + r["status"].(string))
		}
		return calls(call("g1", "design_valve_flange", map[string]any{"holes": 24, "outer_diameter_mm": 60, "material": "steel"}))
	}}
	_, c := stack(t, m)
	cid := c.newConversation()
	tid := c.send(cid, "a tiny flange with 24 holes in steel")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil || v.Form.Calls[0].Note == "" {
		t.Fatalf("turn = %s form %+v, want the agent's input-required as a form with its message", v.Status, v.Form)
	}
	var field string
	for _, f := range v.Form.Calls[0].Fields {
		if f.Name == "outer_diameter_mm" {
			field = f.Name
		}
	}
	if field == "" {
		t.Fatalf("fields = %+v, want outer_diameter_mm", v.Form.Calls[0].Fields)
	}
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{c.formCall(cid, tid): map[string]any{"outer_diameter_mm": 1200}}}); code != http.StatusAccepted {
		t.Fatalf("answer = %d", code)
	}
	if v = c.wait(cid, tid); v.Status != "succeeded" || v.Reply != "flange: succeeded" || len(v.Artifacts) != 1 {
		t.Fatalf("turn = %s %q artifacts %d form %+v; want succeeded with the drawing", v.Status, v.Reply, len(v.Artifacts), v.Form)
	}
}

// Issue 5: an agent that is down never breaks a turn: its skills are just
// absent (or marked unavailable once it was seen), and the other agents work.
func TestDeadAgentDoesNotBreakTurns(t *testing.T) {
	t.Parallel()
	_, c := stack(t, nil, func(cfg *Config) { cfg.Agents = []string{"http://127.0.0.1:1"} })
	cid := c.newConversation()
	if v := c.wait(cid, c.send(cid, "Create a PNG image with the word Alive")); v.Status != "succeeded" || len(v.Artifacts) != 2 {
		t.Fatalf("turn = %s %q, want succeeded with the SVG and PNG", v.Status, v.Reply)
	}
	var cat struct {
		Skills []struct {
			Name string `json:"name"`
		} `json:"skills"`
	}
	if code := c.do("GET", "/v1/catalog", nil, &cat); code != http.StatusOK || len(cat.Skills) != 4 {
		t.Errorf("catalog = %d with %d skills, want the 4 demo skills", code, len(cat.Skills))
	}
}

// docs/design.md §3.5: files uploaded for a turn are named in its user message; the
// model passes the upload's artifact id on, and the specialist fetches the
// bytes by a signed URL of the local stack.
func TestUploadedFileFeedsASkill(t *testing.T) {
	t.Parallel()
	idRe := regexp.MustCompile(`artifact_id=(art_[0-9a-f]+)`)
	m := &model{decide: func(req llm.Request) *llm.Response {
		if r, ok := toolResults(req)["u1"]; ok {
			return answer("png: " + r["status"].(string))
		}
		id := idRe.FindStringSubmatch(lastUser(req))
		if id == nil {
			return answer("no file named")
		}
		return calls(call("u1", "convert_svg_to_png", map[string]any{"artifact_id": id[1]}))
	}}
	_, c := stack(t, m)
	cid := c.newConversation()
	upID := c.upload(cid, "box.svg", "image/svg+xml", boxSVG)
	var out struct {
		TurnID string `json:"turn_id"`
	}
	if code := c.do("POST", "/v1/conversations/"+cid+"/messages", map[string]any{"text": "convert this to png", "files": []string{upID}}, &out); code != http.StatusAccepted {
		t.Fatalf("POST message = %d", code)
	}
	v := c.wait(cid, out.TurnID)
	if v.Status != "succeeded" || v.Reply != "png: succeeded" || len(v.Artifacts) != 1 || v.Artifacts[0].MimeType != "image/png" {
		t.Fatalf("turn = %s %q artifacts %+v; want succeeded with a PNG", v.Status, v.Reply, v.Artifacts)
	}
	if ink := inkFraction(c.downloadPNG(cid, v.Artifacts[0].ID)); ink < 0.3 {
		t.Errorf("ink = %.2f, want the black box of the uploaded SVG", ink)
	}
}
