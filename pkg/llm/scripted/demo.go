package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/clientagent/clientagent/pkg/llm"
)

// Tool names the demo model knows (the demo specialists' skills).
const (
	toolCreateSVG  = "create_svg_artifact"
	toolConvertPNG = "convert_svg_to_png"
	toolFlange     = "design_valve_flange"
	toolPublish    = "publish_artifact"
)

// maxDemoSteps bounds the tool-call messages the demo makes for one user
// message, so a platform that keeps answering oddly cannot make it loop.
const maxDemoSteps = 6

// HelpText is the demo model's answer to anything it has no rule for.
const HelpText = `This is the offline demo model: no real LLM is configured, so I only follow a few scripted demo prompts:
- "Create a PNG image with the word Popelnase" (any word) — create_svg_artifact, then convert_svg_to_png
- "Create an SVG with the word Hello"
- "Design a valve flange with 4 holes" (asks for the material with a form), then "Redo the valve with 6 holes"
- "Publish it to web" — publish_artifact, after your approval
- "Make three pictures: cat, dog and bird" — three calls in one batch, run in parallel
- "/workflow word_to_png" — a workflow started without the model (a form asks for the word), or "/workflow word_to_png render Hello"
- "Call everything_echo with message hello" — any offered tool (an MCP server's too), its arguments as JSON or from the text
- "Ask the inner clientagent: Create a PNG image with the word Nested" — another clientagent's chat skill (two stacks, README)

To use a real model, set OPENAI_BASE_URL (and OPENAI_API_KEY, CLIENTAGENT_MODEL) for any OpenAI-compatible endpoint (OpenAI, LiteLLM, vLLM, Ollama), or set CLIENTAGENT_LLM=bedrock (with CLIENTAGENT_MODEL set to a Bedrock model id) and AWS credentials, then restart.`

// Demo returns the offline demo model: a rule-based stand-in for an LLM
// that reads the transcript (the last user message and the tool results
// since it) and the offered tools, and drives the documented demo prompts
// end to end (README "Quick start"). It answers anything else with HelpText.
// Like any model it only asks for calls; the platform validates and runs them.
func Demo() *Provider { return Func(demoAnswer) }

var (
	rePublish  = lazyRegexp(`(?is)^\s*(?:please\s+)?publish\s+(.+?)\s+(?:to|on)\s+(?:the\s+)?([\w#@.-]+?)[\s.!]*$`)
	rePictures = lazyRegexp(`(?is)^\s*(?:(?:please\s+)?(?:make|create|draw)\s+(?:me\s+)?(?:\w+\s+)?(?:pictures|images|svgs)\s*(?::|of)\s*|svgs?\s+)(.+)$`)
	reWord     = lazyRegexp(`(?i)\bwith\s+(?:the\s+)?(?:word|text)\s+(?:"([^"]+)"|'([^']+)'|“([^”]+)”|([^\s.,!?;:]+))`)
	reValve    = lazyRegexp(`(?i)\b(?:valve|flange)\b`)
	reHoles    = lazyRegexp(`(?i)\b(\d+|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+(?:bolt\s+)?holes?\b`)
	reRedo     = lazyRegexp(`(?i)\b(?:redo|again|repeat|change|modify|update|instead)\b`)
	reArtID    = lazyRegexp(`artifact_id"?\s*[:=]\s*"?([^\s",)}\]]+)`)
	reMime     = lazyRegexp(`mime_type"?\s*[:=]\s*"?([^\s",)}\]]+)`)
	// reChosen finds the platform's hint for "/workflow <id> text" (docs/design.md §3.4).
	reChosen = lazyRegexp(`call the tool (workflow_[A-Za-z0-9_-]+)`)
	reNumber = lazyRegexp(`-?\d+(?:\.\d+)?`)
	reQuoted = lazyRegexp(`"([^"]+)"|“([^”]+)”|'([^']+)'`)
	// reCall is "Call <tool> with <arguments>": any offered tool by name.
	reCall = lazyRegexp(`(?is)^\s*(?:please\s+)?(?:call|use)\s+(?:the\s+)?(?:tool\s+)?([A-Za-z0-9_.-]+)(?:\s+with\s+(.+?))?[\s.!]*$`)
	// rePeer is "Ask the inner clientagent: <text>": another clientagent's chat skill.
	rePeer = lazyRegexp(`(?is)^\s*ask\s+(?:the\s+)?(?:inner|other|second)\s+(?:clientagent|stack|agent)\s*[:,]?\s*(.+)$`)
)

// toolPeer is the skill another clientagent offers for one turn on free text.
const toolPeer = "chat"

// lazyRegexp compiles expr on first use: the demo model is linked into
// llmstep (CLIENTAGENT_LLM=scripted) and rarely runs there, and compiling
// these at package init cost every cold start ≈ 0.5 ms.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

var numberWords = map[string]int{"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

// toolResult is the compact tool result of docs/design.md §3.5, as far as the demo reads it.
type toolResult struct {
	Status    string            `json:"status"`
	Summary   string            `json:"summary"`
	Result    string            `json:"result"`
	Artifacts []resultArtifact  `json:"artifacts"`
	Inputs    json.RawMessage   `json:"inputs"`
	Error     string            `json:"error"`
	Sources   map[string]string `json:"input_sources"`
}

type resultArtifact struct {
	ID       string `json:"artifact_id"`
	Name     string `json:"name"`
	MimeType string `json:"mime_type"`
}

// madeCall is a call the model made since the last user message, with its result.
type madeCall struct {
	call      llm.ToolCall
	result    toolResult
	hasResult bool
}

// demoState is what the demo reads from a request.
type demoState struct {
	req  llm.Request
	user string // the last user message, without an appended files note
	// chosen is the workflow tool the user chose with free text, if any.
	chosen string
	calls  []madeCall
	steps  int // assistant messages with tool calls since the user message
	tools  map[string]bool
}

func readState(req llm.Request) demoState {
	st := demoState{req: req, tools: map[string]bool{}}
	for _, t := range req.Tools {
		st.tools[t.Name] = true
	}
	last := -1
	for i, m := range req.Messages {
		if m.Role == llm.RoleUser {
			last = i
		}
	}
	if last < 0 {
		return st
	}
	// The platform appends "Files uploaded with this message: …" after a blank line.
	st.user = strings.TrimSpace(strings.SplitN(req.Messages[last].Content, "\n\n", 2)[0])
	if m := reChosen().FindStringSubmatch(req.Messages[last].Content); m != nil {
		st.chosen = m[1]
	}
	at := map[string]int{}
	for _, m := range req.Messages[last+1:] {
		switch m.Role {
		case llm.RoleAssistant:
			if len(m.ToolCalls) > 0 {
				st.steps++
			}
			for _, c := range m.ToolCalls {
				at[c.ID] = len(st.calls)
				st.calls = append(st.calls, madeCall{call: c})
			}
		case llm.RoleTool:
			i, ok := at[m.ToolCallID]
			if !ok {
				continue
			}
			st.calls[i].hasResult = true
			if err := json.Unmarshal([]byte(m.Content), &st.calls[i].result); err != nil {
				st.calls[i].result = toolResult{Summary: m.Content}
			}
		}
	}
	return st
}

// find returns the newest call of tool, or nil.
func (st *demoState) find(tool string) *madeCall {
	for i := len(st.calls) - 1; i >= 0; i-- {
		if st.calls[i].call.Name == tool {
			return &st.calls[i]
		}
	}
	return nil
}

func demoAnswer(req llm.Request) (*llm.Response, error) {
	st := readState(req)
	if st.user == "" {
		return text(HelpText), nil
	}
	if r := st.problem(); r != nil {
		return r, nil
	}
	if st.steps >= maxDemoSteps {
		return text(fmt.Sprintf("I stopped after %d rounds of tool calls without finishing; please rephrase the request.", st.steps)), nil
	}
	if r := st.workflow(); r != nil {
		return r, nil
	}
	if m := rePeer().FindStringSubmatch(st.user); m != nil {
		return st.call(toolPeer, mustJSON(map[string]any{"text": strings.TrimSpace(m[1])})), nil
	}
	if m := reCall().FindStringSubmatch(st.user); m != nil && st.tools[m[1]] {
		return st.call(m[1], st.callArgs(m[1], m[2])), nil
	}
	switch {
	case rePublish().MatchString(st.user):
		m := rePublish().FindStringSubmatch(st.user)
		return st.publish(m[1], strings.ToLower(m[2])), nil
	case rePictures().MatchString(st.user) && !reWord().MatchString(st.user):
		return st.pictures(splitList(rePictures().FindStringSubmatch(st.user)[1])), nil
	case reWord().MatchString(st.user):
		m := reWord().FindStringSubmatch(st.user)
		word := firstNonEmpty(m[1:]...)
		return st.word(word, strings.Contains(strings.ToLower(st.user), "png")), nil
	case reValve().MatchString(st.user):
		return st.valve(), nil
	}
	return text(HelpText), nil
}

// workflow answers once a workflow call has its result (an explicit
// selection runs one before the model is asked anything), and fills the
// inputs of a workflow the user chose with free text from that text.
func (st *demoState) workflow() *llm.Response {
	for _, c := range st.calls {
		if strings.HasPrefix(c.call.Name, "workflow_") && c.hasResult {
			var names []string
			for _, a := range c.result.Artifacts {
				names = append(names, describe(a))
			}
			// The workflow's summary says it finished and what each step did;
			// say it once, and name only the artifacts it does not name.
			out := strings.TrimSpace(c.result.Summary)
			if out == "" {
				out = fmt.Sprintf("The workflow %s finished.", strings.TrimPrefix(c.call.Name, "workflow_"))
			}
			var unnamed []string
			for i, a := range c.result.Artifacts {
				if a.Name == "" || !strings.Contains(out, a.Name) {
					unnamed = append(unnamed, names[i])
				}
			}
			if len(unnamed) > 0 {
				out += "\nArtifacts: " + strings.Join(unnamed, ", ") + "."
			}
			return text(out)
		}
	}
	if st.chosen == "" || len(st.calls) > 0 {
		return nil
	}
	for _, t := range st.req.Tools {
		if t.Name == st.chosen {
			return calls(llm.ToolCall{Name: t.Name, Arguments: mustJSON(fillInputs(t.Parameters, st.user))})
		}
	}
	return text(fmt.Sprintf("The workflow tool %s is not offered.", st.chosen))
}

// fillInputs reads a workflow's flat inputs from free text the way a model
// might: a string input takes "with the word X", a quoted phrase or the
// last word; a number takes the number before the input's name ("6 holes")
// or the first number. Inputs it cannot read are left out (user input is
// then asked in a form).
func fillInputs(schema json.RawMessage, text string) map[string]any {
	var sc struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &sc)
	out := map[string]any{}
	for name, p := range sc.Properties {
		leaf := name[strings.LastIndex(name, ".")+1:]
		switch p.Type {
		case "integer", "number":
			near := regexp.MustCompile(`(?i)(-?\d+(?:\.\d+)?)\s*(?:mm\s+)?` + regexp.QuoteMeta(strings.Split(leaf, "_")[0]))
			if m := near.FindStringSubmatch(text); m != nil {
				out[name] = json.Number(m[1])
			} else if len(sc.Properties) == 1 {
				if m := reNumber().FindString(text); m != "" {
					out[name] = json.Number(m)
				}
			}
		case "string":
			if m := reWord().FindStringSubmatch(text); m != nil {
				out[name] = firstNonEmpty(m[1:]...)
			} else if m := reQuoted().FindStringSubmatch(text); m != nil {
				out[name] = firstNonEmpty(m[1:]...)
			} else if f := strings.Fields(text); len(f) > 0 && len(sc.Properties) == 1 {
				out[name] = strings.Trim(f[len(f)-1], ".,!?;:")
			}
		}
	}
	return out
}

// problem answers with a final text when a call since the user message
// failed, was rejected or did not run: the demo never retries.
func (st *demoState) problem() *llm.Response {
	for _, c := range st.calls {
		if !c.hasResult {
			continue
		}
		r := c.result
		detail := firstNonEmpty(r.Error, r.Summary, "no details given")
		switch {
		case r.Status == "rejected" && c.call.Name == toolPublish:
			a := args(c.call)
			return text(fmt.Sprintf("Not published: publishing %v to %v was rejected (%s).", a["artifact_id"], a["channel"], detail))
		case r.Status == "rejected":
			return text(fmt.Sprintf("%s was not run: it was rejected (%s).", c.call.Name, detail))
		case r.Status == "failed" || r.Status == "not_executed" || r.Error != "":
			return text(fmt.Sprintf("%s did not succeed (%s): %s", c.call.Name, firstNonEmpty(r.Status, "error"), detail))
		}
	}
	return nil
}

// call makes one call of tool with args and, once it has its result,
// tells what the tool said and the artifacts it made.
func (st *demoState) call(tool, args string) *llm.Response {
	done := st.find(tool)
	if done == nil {
		if !st.tools[tool] {
			return st.missingTool(tool)
		}
		return calls(llm.ToolCall{Name: tool, Arguments: args})
	}
	out := fmt.Sprintf("%s answered: %s", tool, firstNonEmpty(strings.TrimSpace(done.result.Summary), strings.TrimSpace(done.result.Result), "(no text)"))
	var names []string
	for _, a := range done.result.Artifacts {
		if a.Name == "" || !strings.Contains(out, a.Name) {
			names = append(names, describe(a))
		}
	}
	if len(names) > 0 {
		out += "\nArtifacts: " + strings.Join(names, ", ") + "."
	}
	return text(out)
}

// callArgs are a tool's arguments from "with …": a JSON object as it is,
// else read from the text like a workflow's inputs.
func (st *demoState) callArgs(tool, with string) string {
	with = strings.TrimSpace(with)
	var obj map[string]any
	if json.Unmarshal([]byte(with), &obj) == nil {
		return with
	}
	for _, t := range st.req.Tools {
		if t.Name == tool {
			in := fillInputs(t.Parameters, with)
			// "message hello": a single string input takes the text after its name.
			var sc struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			}
			_ = json.Unmarshal(t.Parameters, &sc)
			for name, p := range sc.Properties {
				if rest, ok := strings.CutPrefix(with, name+" "); ok && p.Type == "string" {
					in[name] = strings.TrimSpace(rest)
				}
			}
			return mustJSON(in)
		}
	}
	return "{}"
}

func (st *demoState) missingTool(tool string) *llm.Response {
	return text(fmt.Sprintf("I need the tool %s for this, but it is not offered. Are the demo specialists running?", tool))
}

// word drives "Create a PNG image with the word X" (docs/design.md §2) and the
// SVG-only variant.
func (st *demoState) word(word string, wantPNG bool) *llm.Response {
	svg := st.find(toolCreateSVG)
	if svg == nil {
		if !st.tools[toolCreateSVG] {
			return st.missingTool(toolCreateSVG)
		}
		return calls(llm.ToolCall{Name: toolCreateSVG, Arguments: mustJSON(map[string]any{"word": word})})
	}
	if !svg.hasResult {
		return text("The SVG call has no result yet.")
	}
	svgArt, ok := pick(svg.result.Artifacts, "image/svg+xml")
	if !ok {
		return text(fmt.Sprintf("%s succeeded but returned no artifact.", toolCreateSVG))
	}
	if !wantPNG {
		return text(fmt.Sprintf("Here is the SVG image with the word %s. Artifact: %s.", word, describe(svgArt)))
	}
	png := st.find(toolConvertPNG)
	if png == nil {
		if !st.tools[toolConvertPNG] {
			return text(fmt.Sprintf("I created the SVG with the word %s (%s), but cannot convert it: %s is not offered.", word, describe(svgArt), toolConvertPNG))
		}
		return calls(llm.ToolCall{Name: toolConvertPNG, Arguments: mustJSON(map[string]any{"artifact_id": svgArt.ID})})
	}
	pngArt, ok := pick(png.result.Artifacts, "image/png")
	if !ok {
		return text(fmt.Sprintf("%s succeeded but returned no artifact.", toolConvertPNG))
	}
	return text(fmt.Sprintf("Here is the PNG image with the word %s. Artifact: %s.", word, describe(pngArt)))
}

// pictures drives "Make three pictures: A, B and C": independent calls go
// in one assistant message, which the platform runs in parallel (docs/design.md §3.3).
func (st *demoState) pictures(items []string) *llm.Response {
	if len(items) == 0 {
		return text(HelpText)
	}
	if st.find(toolCreateSVG) == nil {
		if !st.tools[toolCreateSVG] {
			return st.missingTool(toolCreateSVG)
		}
		var cs []llm.ToolCall
		for _, it := range items {
			cs = append(cs, llm.ToolCall{Name: toolCreateSVG, Arguments: mustJSON(map[string]any{"word": it})})
		}
		return calls(cs...)
	}
	var parts []string
	for _, c := range st.calls {
		if c.call.Name != toolCreateSVG {
			continue
		}
		a, ok := pick(c.result.Artifacts, "image/svg+xml")
		if !ok {
			parts = append(parts, fmt.Sprintf("%v (no artifact)", args(c.call)["word"]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%v: %s", args(c.call)["word"], describe(a)))
	}
	return text(fmt.Sprintf("Here are the %d pictures:\n- %s", len(parts), strings.Join(parts, "\n- ")))
}

// valve drives "Design a valve flange with N holes" and "Redo the valve with
// M holes". It never sends material: that is a user-input field the platform
// asks for with a form. A redo starts from the skill's recent inputs in the
// system prompt (docs/design.md §3.5 recent_skill_inputs).
func (st *demoState) valve() *llm.Response {
	holes := 0
	if m := reHoles().FindStringSubmatch(st.user); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			holes = n
		} else {
			holes = numberWords[strings.ToLower(m[1])]
		}
	}
	done := st.find(toolFlange)
	if done == nil {
		if !st.tools[toolFlange] {
			return st.missingTool(toolFlange)
		}
		a := map[string]any{"outer_diameter_mm": 120}
		if reRedo().MatchString(st.user) {
			if recent := recentInputs(st.req.Context, toolFlange); recent != nil {
				a = recent
			}
		}
		if holes > 0 {
			a["holes"] = holes
		} else if _, ok := a["holes"]; !ok {
			a["holes"] = 4
		}
		return calls(llm.ToolCall{Name: toolFlange, Arguments: mustJSON(a)})
	}
	inputs := args(done.call)
	for k, v := range resultInputs(done.result.Inputs) {
		inputs[k] = v
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Here is the valve flange with %v holes", inputs["holes"])
	if d, ok := inputs["outer_diameter_mm"]; ok {
		fmt.Fprintf(&b, ", outer diameter %v mm", d)
	}
	if m, ok := inputs["material"]; ok {
		fmt.Fprintf(&b, ", material %v", m)
	}
	b.WriteString(".")
	if len(done.result.Artifacts) > 0 {
		names := make([]string, 0, len(done.result.Artifacts))
		for _, a := range done.result.Artifacts {
			names = append(names, describe(a))
		}
		fmt.Fprintf(&b, " Drawing: %s.", strings.Join(names, ", "))
	}
	return text(b.String())
}

// publish drives "Publish <something> to <channel>": it publishes the
// artifact the text names by id, else the newest one of the kind the text
// names (PNG/SVG), else the newest in the system prompt's catalog.
func (st *demoState) publish(what, channel string) *llm.Response {
	if done := st.find(toolPublish); done != nil {
		// The specialist's own words say what it did, with the arguments
		// that ran (an edit on approval may have changed the model's).
		sum := strings.TrimSpace(done.result.Summary)
		if strings.HasPrefix(sum, "Published") {
			return text(sum)
		}
		a := args(done.call)
		if in := resultInputs(done.result.Inputs); in != nil {
			a = in
		}
		return text(strings.TrimSpace(fmt.Sprintf("Published %v to %v. %s", a["artifact_id"], a["channel"], sum)))
	}
	if !st.tools[toolPublish] {
		return st.missingTool(toolPublish)
	}
	id := chooseArtifact(st.req, catalog(st.req), what)
	if id == "" {
		return text("There is no artifact in this conversation to publish yet. Create one first, e.g. \"Create a PNG image with the word Hello\".")
	}
	return calls(llm.ToolCall{Name: toolPublish, Arguments: mustJSON(map[string]any{"artifact_id": id, "channel": channel})})
}

var reUpload = lazyRegexp(`artifact_id=([A-Za-z0-9_\-]+), ([a-z]+/[A-Za-z0-9.+\-]+)\)`)

// catalog lists the artifacts the model can see, oldest first: the system
// context's catalog lines (any line with artifact_id=… or "artifact_id": …),
// then artifacts in tool results of the transcript not listed there.
func catalog(req llm.Request) []resultArtifact {
	var out []resultArtifact
	seen := map[string]bool{}
	add := func(a resultArtifact) {
		if a.ID != "" && !seen[a.ID] {
			seen[a.ID] = true
			out = append(out, a)
		}
	}
	for _, line := range strings.Split(req.Context, "\n") {
		for _, m := range reArtID().FindAllStringSubmatch(line, -1) {
			a := resultArtifact{ID: m[1]}
			if mm := reMime().FindStringSubmatch(line); mm != nil {
				a.MimeType = mm[1]
			}
			add(a)
		}
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			// Files uploaded with a message: "name (artifact_id=…, mime)".
			for _, f := range reUpload().FindAllStringSubmatch(m.Content, -1) {
				add(resultArtifact{ID: f[1], MimeType: f[2]})
			}
			continue
		}
		if m.Role != llm.RoleTool {
			continue
		}
		var r toolResult
		if json.Unmarshal([]byte(m.Content), &r) == nil {
			for _, a := range r.Artifacts {
				add(a)
			}
		}
	}
	return out
}

// chooseArtifact picks what "publish <what>" names: an artifact by id,
// else the newest of the kind it names (PNG/SVG), else the newest.
func chooseArtifact(req llm.Request, arts []resultArtifact, what string) string {
	for _, a := range arts {
		if strings.Contains(what, a.ID) {
			return a.ID
		}
	}
	lw := strings.ToLower(what)
	for _, kind := range []string{"png", "svg"} {
		if !strings.Contains(lw, kind) {
			continue
		}
		for i := len(arts) - 1; i >= 0; i-- {
			if strings.Contains(arts[i].MimeType, kind) {
				return arts[i].ID
			}
		}
	}
	if len(arts) == 0 {
		return ""
	}
	return newest(req, arts)
}

// newest is the artifact the transcript names last ("it"): the catalog
// lists first the artifacts the transcript does not name, so its last
// entry need not be the newest one.
func newest(req llm.Request, arts []resultArtifact) string {
	id, at := arts[len(arts)-1].ID, -1
	for i, m := range req.Messages {
		for _, a := range arts {
			if j := strings.LastIndex(m.Content, a.ID); j >= 0 && i<<20+j > at {
				id, at = a.ID, i<<20+j
			}
		}
	}
	return id
}

// recentInputs finds "<tool>" followed by a JSON object in the system
// prompt (e.g. "- design_valve_flange: {…}") and returns the last such
// object, or nil. Lenient on purpose: the prompt's layout is not a contract.
func recentInputs(system, tool string) map[string]any {
	var found map[string]any
	rest := system
	for {
		i := strings.Index(rest, tool)
		if i < 0 {
			return found
		}
		rest = rest[i+len(tool):]
		j := strings.IndexByte(rest, '{')
		if j < 0 || strings.TrimLeft(rest[:j], " \t:=\"'") != "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(rest[j:]))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) == nil && m != nil {
			found = m
		}
	}
}

// resultInputs reads a result's "inputs", an object or its JSON as a string.
func resultInputs(raw json.RawMessage) map[string]any {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			raw = []byte(s)
		}
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func args(c llm.ToolCall) map[string]any {
	m := map[string]any{}
	dec := json.NewDecoder(strings.NewReader(c.Arguments))
	dec.UseNumber()
	_ = dec.Decode(&m)
	return m
}

// pick returns the first artifact of mime type, else the first artifact.
func pick(arts []resultArtifact, mime string) (resultArtifact, bool) {
	for _, a := range arts {
		if a.MimeType == mime {
			return a, true
		}
	}
	if len(arts) > 0 {
		return arts[0], true
	}
	return resultArtifact{}, false
}

func describe(a resultArtifact) string {
	if a.Name != "" {
		return fmt.Sprintf("%s (artifact_id %s)", a.Name, a.ID)
	}
	return "artifact_id " + a.ID
}

// splitList splits "A, B and C" into its items.
func splitList(s string) []string {
	s = strings.NewReplacer(" and ", ",", " & ", ",", ";", ",").Replace(strings.TrimSpace(s))
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.Trim(strings.TrimSpace(p), `.!?"'`)
		p = strings.TrimSpace(strings.TrimPrefix(p, "and "))
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("scripted: marshal %T: %v", v, err))
	}
	return string(b)
}

func text(s string) *llm.Response { return &llm.Response{Text: s} }

func calls(cs ...llm.ToolCall) *llm.Response { return &llm.Response{ToolCalls: cs} }
