package demoagents

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/catalog"
)

// stack is the demo agents on an httptest server that also serves
// /files/, playing the artifact store's signed URLs on the same origin (as
// the local stack does), plus another loopback server, files, whose links
// the agents must refuse (netguard).
type stack struct {
	agents *httptest.Server
	files  *httptest.Server
	ledger *Ledger

	mu    sync.Mutex
	blobs map[string][]byte
}

func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackWith(t, Options{})
}

// newStackWith is newStack with opts; a nil Publications becomes a Redis
// ledger when opts.Redis is set, else an in-memory one.
func newStackWith(t *testing.T, opts Options) *stack {
	t.Helper()
	if opts.Publications == nil {
		opts.Publications = NewMemoryLedger()
		if opts.Redis != nil {
			opts.Publications = NewRedisLedger(opts.Redis)
		}
	}
	s := &stack{ledger: opts.Publications, blobs: map[string][]byte{}}
	blob := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, ok := s.blobs[strings.TrimPrefix(r.URL.Path, "/files/")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})
	var h http.Handler
	s.agents = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/files/") {
			blob(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.agents.Close)
	h = Handler(s.agents.URL, opts)
	s.files = httptest.NewServer(blob)
	t.Cleanup(s.files.Close)
	return s
}

// put serves b on the agents' own origin (the stack's /files/) and returns
// the FilePart the orchestrator would attach.
func (s *stack) put(id, name, mime string, b []byte) a2a.FilePart {
	return s.putAt(s.agents.URL, id, name, mime, b)
}

// putAt serves b under base + "/files/" (s.agents.URL or s.files.URL).
func (s *stack) putAt(base, id, name, mime string, b []byte) a2a.FilePart {
	s.mu.Lock()
	s.blobs[id] = b
	s.mu.Unlock()
	return a2a.FilePart{
		File:     a2a.FileURI{FileMeta: a2a.FileMeta{Name: name, MimeType: mime}, URI: base + "/files/" + id + "?sig=abc"},
		Metadata: map[string]any{"artifact_id": id},
	}
}

func (s *stack) client(t *testing.T, path string) *a2aclient.Client {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), s.agents.URL+path)
	if err != nil {
		t.Fatalf("Resolve(%s) error = %v", path, err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card)
	if err != nil {
		t.Fatalf("NewFromCard(%s) error = %v", path, err)
	}
	return c
}

// send is the orchestrator's message shape: arguments as a DataPart,
// files as FileParts, inputSources metadata, the call id as message id.
func send(t *testing.T, c *a2aclient.Client, callID string, args map[string]any, files ...a2a.FilePart) *a2a.Task {
	t.Helper()
	parts := a2a.ContentParts{a2a.DataPart{Data: args}}
	for _, f := range files {
		parts = append(parts, f)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	msg.ID = callID
	sources := map[string]any{}
	for k := range args {
		sources[k] = "model"
	}
	msg.Metadata = map[string]any{"inputSources": sources}
	return sendMessage(t, c, msg)
}

func sendMessage(t *testing.T, c *a2aclient.Client, msg *a2a.Message) *a2a.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30e9)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatalf("SendMessage() error = %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage() = %T, want *a2a.Task", res)
	}
	return task
}

func statusText(task *a2a.Task) string {
	if task.Status.Message == nil {
		return ""
	}
	var out []string
	for _, p := range task.Status.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			out = append(out, tp.Text)
		}
	}
	return strings.Join(out, "\n")
}

func statusData(task *a2a.Task) map[string]any {
	if task.Status.Message == nil {
		return nil
	}
	for _, p := range task.Status.Message.Parts {
		if dp, ok := p.(a2a.DataPart); ok {
			return dp.Data
		}
	}
	return nil
}

type gotFile struct {
	name, mime string
	data       []byte
}

func taskFiles(t *testing.T, task *a2a.Task) []gotFile {
	t.Helper()
	var out []gotFile
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			fp, ok := p.(a2a.FilePart)
			if !ok {
				continue
			}
			fb, ok := fp.File.(a2a.FileBytes)
			if !ok {
				t.Fatalf("artifact %s file = %T, want FileBytes", a.Name, fp.File)
			}
			b, err := base64.StdEncoding.DecodeString(fb.Bytes)
			if err != nil {
				t.Fatalf("artifact %s bytes: %v", a.Name, err)
			}
			out = append(out, gotFile{name: fb.Name, mime: fb.MimeType, data: b})
		}
	}
	return out
}

func wantState(t *testing.T, task *a2a.Task, want a2a.TaskState) {
	t.Helper()
	if task.Status.State != want {
		t.Fatalf("task state = %s (%q), want %s", task.Status.State, statusText(task), want)
	}
}

func TestAgentCards(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	type cardView struct {
		URL      string
		Skill    string
		Required []string
		Refs     []string
		User     []string
		Approval bool
	}
	want := map[string]cardView{
		PathSVG:     {URL: s.agents.URL + PathSVG, Skill: "create_svg_artifact", Required: []string{"word"}},
		PathPNG:     {URL: s.agents.URL + PathPNG, Skill: "convert_svg_to_png", Required: []string{"artifact_id"}, Refs: []string{"artifact_id"}},
		PathFlange:  {URL: s.agents.URL + PathFlange, Skill: "design_valve_flange", Required: []string{"holes", "outer_diameter_mm", "material"}, User: []string{"material"}},
		PathPublish: {URL: s.agents.URL + PathPublish, Skill: "publish_artifact", Required: []string{"artifact_id", "channel"}, Refs: []string{"artifact_id"}, Approval: true},
	}
	urls := AgentURLs(s.agents.URL + "/")
	if len(urls) != 4 {
		t.Fatalf("AgentURLs() = %v, want 4 urls", urls)
	}
	for _, u := range urls {
		path := strings.TrimPrefix(u, s.agents.URL)
		card, err := agentcard.DefaultResolver.Resolve(t.Context(), u)
		if err != nil {
			t.Fatalf("Resolve(%s) error = %v", u, err)
		}
		if len(card.Skills) != 1 || len(card.Capabilities.Extensions) != 1 {
			t.Fatalf("card %s: %d skills, %d extensions, want 1 and 1", path, len(card.Skills), len(card.Capabilities.Extensions))
		}
		ext := card.Capabilities.Extensions[0]
		if ext.URI != catalog.ExtensionURI {
			t.Errorf("card %s extension URI = %q, want %q", path, ext.URI, catalog.ExtensionURI)
		}
		raw, _ := json.Marshal(ext.Params["skills"])
		var sk map[string]catalog.SkillExtension
		if err := json.Unmarshal(raw, &sk); err != nil {
			t.Fatalf("card %s params.skills: %v", path, err)
		}
		se, ok := sk[card.Skills[0].ID]
		if !ok {
			t.Fatalf("card %s params.skills has no entry for %s", path, card.Skills[0].ID)
		}
		var schema struct {
			Type       string
			Required   []string
			Properties map[string]map[string]any
		}
		if err := json.Unmarshal(se.InputSchema, &schema); err != nil {
			t.Fatalf("card %s input_schema: %v", path, err)
		}
		var refs []string
		for name, p := range schema.Properties {
			if p["x_artifact_ref"] == true {
				refs = append(refs, name)
			}
			if p["description"] == nil {
				t.Errorf("card %s property %s has no description", path, name)
			}
		}
		got := cardView{URL: card.URL, Skill: card.Skills[0].ID, Required: schema.Required, Refs: refs, User: se.UserInput, Approval: se.RequiresApproval}
		if diff := cmp.Diff(want[path], got); diff != "" {
			t.Errorf("card %s mismatch (-want +got):\n%s", path, diff)
		}
		if schema.Type != "object" || len(card.Skills[0].Description) < 80 {
			t.Errorf("card %s: schema type %q, description %q; want an object schema and a routing description", path, schema.Type, card.Skills[0].Description)
		}
	}
}

var pathData = regexp.MustCompile(`<path[^>]* d="M[-0-9. ]+[LQC][^"]*Z"`)

func TestCreateSVG(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	task := send(t, s.client(t, PathSVG), "call_svg", map[string]any{"word": "Popelnase", "color": "navy"})
	wantState(t, task, a2a.TaskStateCompleted)
	files := taskFiles(t, task)
	if len(files) != 1 || files[0].name != "Popelnase.svg" || files[0].mime != "image/svg+xml" {
		t.Fatalf("files = %+v, want one Popelnase.svg image/svg+xml", files)
	}
	svg := string(files[0].data)
	if !pathData.MatchString(svg) {
		t.Errorf("SVG has no glyph path data:\n%.300s", svg)
	}
	if strings.Contains(svg, "<text") {
		t.Errorf("SVG contains <text>; letters must be paths")
	}
	// 9 letters, each at least one closed contour.
	if n := strings.Count(svg, "Z"); n < 9 {
		t.Errorf("SVG has %d closed contours, want >= 9", n)
	}
	if !strings.Contains(statusText(task), "Popelnase.svg") {
		t.Errorf("status text = %q, want it to name the file", statusText(task))
	}
}

func TestCreateSVGRejectsBadArguments(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	c := s.client(t, PathSVG)
	for _, args := range []map[string]any{
		{},
		{"word": "x", "color": `red" onload="x`},
		{"word": "x", "font_size": "big"},
	} {
		task := send(t, c, "call_bad", args)
		wantState(t, task, a2a.TaskStateFailed)
		if statusText(task) == "" {
			t.Errorf("failed task for %v has no message", args)
		}
	}
	// The model reads what is wrong field by field, not the validator's
	// own text with the schema's URL.
	task := send(t, c, "call_bad", map[string]any{"word": "x", "font_size": "big"})
	if msg := statusText(task); !strings.Contains(msg, "font_size: ") || strings.Contains(msg, "does not validate with") {
		t.Errorf("failed task's message = %q, want the field and its reason alone", msg)
	}
}

// inkStats counts dark pixels in r.
func inkStats(img image.Image, r image.Rectangle) (ink, total int) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if (cr+cg+cb)/3 < 0x6000 {
				ink++
			}
			total++
		}
	}
	return ink, total
}

func TestConvertPopelnaseToPNG(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	svgTask := send(t, s.client(t, PathSVG), "call_1", map[string]any{"word": "Popelnase"})
	wantState(t, svgTask, a2a.TaskStateCompleted)
	svg := taskFiles(t, svgTask)[0]

	fp := s.put("art_0123456789abcdef", svg.name, svg.mime, svg.data)
	task := send(t, s.client(t, PathPNG), "call_2", map[string]any{"artifact_id": "art_0123456789abcdef", "width": 800}, fp)
	wantState(t, task, a2a.TaskStateCompleted)
	files := taskFiles(t, task)
	if len(files) != 1 || files[0].name != "Popelnase.png" || files[0].mime != "image/png" {
		t.Fatalf("files = %+v, want one Popelnase.png image/png", files)
	}
	img, err := png.Decode(bytes.NewReader(files[0].data))
	if err != nil {
		t.Fatalf("png.Decode() error = %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 800 {
		t.Errorf("PNG width = %d, want 800", b.Dx())
	}
	// The text area is inside the quarter-em margin; the word must cover a
	// plausible share of it, and every ninth of it (one letter each) must
	// carry ink, which a blank, solid or smeared image would not.
	m := b.Dx() * 24 / 1000
	area := image.Rect(m, m, b.Dx()-m, b.Dy()-m)
	ink, total := inkStats(img, area)
	frac := float64(ink) / float64(total)
	if frac < 0.03 || frac > 0.60 {
		t.Errorf("ink fraction = %.3f, want between 0.03 and 0.60", frac)
	}
	w := area.Dx() / 9
	for i := range 9 {
		strip := image.Rect(area.Min.X+i*w, area.Min.Y, area.Min.X+(i+1)*w, area.Max.Y)
		if in, tot := inkStats(img, strip); float64(in)/float64(tot) < 0.02 {
			t.Errorf("letter strip %d ink = %d/%d, want ink in every letter", i, in, tot)
		}
	}
	// Corners are background.
	if in, _ := inkStats(img, image.Rect(0, 0, m, m)); in != 0 {
		t.Errorf("corner has %d ink pixels, want 0", in)
	}
}

func TestConvertRejectsGarbage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	c := s.client(t, PathPNG)
	tests := []struct {
		name, body, want string
	}{
		{"not xml", "this is not an svg <<<", "not well-formed"},
		{"not svg root", `<html><body/></html>`, "not <svg>"},
		{"text element", `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><text>hi</text></svg>`, "<text>"},
		{"empty", `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"></svg>`, "no filled shapes"},
	}
	for i, tt := range tests {
		id := "art_bad" + string(rune('a'+i))
		fp := s.put(id, "bad.svg", "image/svg+xml", []byte(tt.body))
		task := send(t, c, "call_"+id, map[string]any{"artifact_id": id}, fp)
		wantState(t, task, a2a.TaskStateFailed)
		if got := statusText(task); !strings.Contains(got, tt.want) {
			t.Errorf("%s: failure message = %q, want it to contain %q", tt.name, got, tt.want)
		}
	}
	// A missing file is a clear failure too.
	task := send(t, c, "call_missing", map[string]any{"artifact_id": "art_missing"})
	wantState(t, task, a2a.TaskStateFailed)
	if !strings.Contains(statusText(task), "art_missing") {
		t.Errorf("missing-file message = %q, want it to name the artifact", statusText(task))
	}
}

// docs/design.md §3.5: a specialist's INPUT_REQUIRED is answered on the same task and
// the answer is merged into the call's arguments.
func TestFlangeInputRequiredRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	c := s.client(t, PathFlange)
	first := send(t, c, "call_fl", map[string]any{"holes": 24, "outer_diameter_mm": 200, "material": "steel"})
	wantState(t, first, a2a.TaskStateInputRequired)
	if !strings.Contains(statusText(first), "outer diameter") {
		t.Errorf("input-required text = %q, want it to say what to change", statusText(first))
	}
	fields, _ := statusData(first)["fields"].([]any)
	if len(fields) == 0 {
		t.Fatalf("input-required data = %v, want fields", statusData(first))
	}
	f0, _ := fields[0].(map[string]any)
	if f0["name"] != "outer_diameter_mm" || f0["type"] != "number" || f0["required"] != true {
		t.Errorf("first field = %v, want required number outer_diameter_mm", f0)
	}

	// The answer carries only the new value; holes and material must come
	// from the task's first message.
	answer := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"outer_diameter_mm": 1200}})
	answer.ID = "call_fl" // the orchestrator reuses its call id
	answer.TaskID = first.ID
	answer.ContextID = first.ContextID
	answer.Metadata = map[string]any{"inputSources": map[string]any{"outer_diameter_mm": "user", "holes": "model", "material": "user"}}
	done := sendMessage(t, c, answer)
	wantState(t, done, a2a.TaskStateCompleted)
	if done.ID != first.ID || done.ContextID != first.ContextID {
		t.Errorf("answer task = %s/%s, want same task %s/%s", done.ID, done.ContextID, first.ID, first.ContextID)
	}
	files := taskFiles(t, done)
	if len(files) != 1 || files[0].name != "flange_24x1200_steel.svg" {
		t.Fatalf("files = %+v, want flange_24x1200_steel.svg", files)
	}
	svg := string(files[0].data)
	// 1 outer disc, 1 bolt circle line, 1 bore, 24 holes.
	if n := strings.Count(svg, "<circle"); n != 27 {
		t.Errorf("drawing has %d circles, want 27", n)
	}
	if strings.Contains(svg, "<text") || !pathData.MatchString(svg) {
		t.Errorf("title must be drawn as paths")
	}
	d := statusData(done)
	if d["holes"] != float64(24) || d["material"] != "steel" || d["outer_diameter_mm"] != float64(1200) {
		t.Errorf("result data = %v, want merged arguments", d)
	}
	// The drawing converts to PNG (chain design → convert).
	fp := s.put("art_flange", files[0].name, files[0].mime, files[0].data)
	pngTask := send(t, s.client(t, PathPNG), "call_png", map[string]any{"artifact_id": "art_flange", "width": 320}, fp)
	wantState(t, pngTask, a2a.TaskStateCompleted)
}

func TestFlangeGeometryProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  map[string]any
		field string // "" = buildable
	}{
		{"fits", map[string]any{"holes": 8, "outer_diameter_mm": 200, "material": "brass"}, ""},
		{"too many holes", map[string]any{"holes": 24, "outer_diameter_mm": 200, "material": "brass"}, "outer_diameter_mm"},
		{"too many holes, explicit bolt circle", map[string]any{"holes": 12, "outer_diameter_mm": 200, "bolt_circle_mm": 80, "bore_mm": 20, "material": "pvc"}, "bolt_circle_mm"},
		{"bore swallows bolt circle", map[string]any{"holes": 4, "outer_diameter_mm": 200, "bore_mm": 160, "material": "steel"}, "bore_mm"},
		{"bolt circle outside", map[string]any{"holes": 4, "outer_diameter_mm": 100, "bolt_circle_mm": 98, "material": "steel"}, "bolt_circle_mm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newFlangeParams(toAny(tt.args).(map[string]any))
			ir := p.check()
			got := ""
			if ir != nil {
				got = ir.fields[0].Name
			}
			if got != tt.field {
				t.Errorf("check() field = %q (%v), want %q", got, ir, tt.field)
			}
		})
	}
	// The suggested minimum outer diameter really fits, one less does not.
	p := newFlangeParams(map[string]any{"holes": float64(24), "outer_diameter_mm": float64(200), "material": "steel"})
	minOD := p.minOuterDiameter()
	for _, tc := range []struct {
		od   float64
		want bool
	}{{minOD, true}, {minOD - 1, false}} {
		q := p
		q.od = tc.od
		q.fill()
		if ok := q.check() == nil; ok != tc.want {
			t.Errorf("od %v buildable = %v, want %v", tc.od, ok, tc.want)
		}
	}
}

func TestPublishLedger(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	c := s.client(t, PathPublish)

	// A call that cannot run publishes nothing.
	bad := send(t, c, "call_p0", map[string]any{"artifact_id": "art_x", "channel": "radio"})
	wantState(t, bad, a2a.TaskStateFailed)
	if n := s.ledger.Len(); n != 0 {
		t.Fatalf("ledger after rejected call = %d, want 0", n)
	}

	fp := s.put("art_pub", "Popelnase.png", "image/png", []byte("png bytes"))
	task := send(t, c, "call_p1", map[string]any{"artifact_id": "art_pub", "channel": "web"}, fp)
	wantState(t, task, a2a.TaskStateCompleted)
	// A retried call (same call id) must not publish twice.
	again := send(t, c, "call_p1", map[string]any{"artifact_id": "art_pub", "channel": "web"}, fp)
	wantState(t, again, a2a.TaskStateCompleted)

	pubs := s.ledger.List()
	if len(pubs) != 1 {
		t.Fatalf("ledger = %d publications, want 1", len(pubs))
	}
	got := pubs[0]
	if got.ArtifactID != "art_pub" || got.Channel != "web" || got.CallID != "call_p1" || got.Size != 9 || got.Name != "Popelnase.png" {
		t.Errorf("publication = %+v", got)
	}

	resp, err := http.Get(s.agents.URL + PathPublish + "/publications")
	if err != nil {
		t.Fatalf("GET publications error = %v", err)
	}
	defer resp.Body.Close()
	var list []Publication
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("decode publications: %v", err)
	}
	if diff := cmp.Diff(pubs, list); diff != "" {
		t.Errorf("GET publications mismatch (-want +got):\n%s", diff)
	}
}

func TestLedgerFile(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/pubs.jsonl"
	l, err := NewLedger(path)
	if err != nil {
		t.Fatalf("NewLedger() error = %v", err)
	}
	if _, err := l.record(t.Context(), Publication{ID: "pub_1", CallID: "c1", Channel: "print"}); err != nil {
		t.Fatalf("record() error = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	l2, err := NewLedger(path)
	if err != nil {
		t.Fatalf("NewLedger(reopen) error = %v", err)
	}
	defer l2.Close()
	if _, err := l2.record(t.Context(), Publication{ID: "pub_2", CallID: "c1"}); err != errAlreadyPublished {
		t.Errorf("record(same call id after reopen) error = %v, want errAlreadyPublished", err)
	}
	if diff := cmp.Diff([]Publication{{ID: "pub_1", CallID: "c1", Channel: "print"}}, l2.List()); diff != "" {
		t.Errorf("List() after reopen mismatch (-want +got):\n%s", diff)
	}
}

func TestPlainTextMessage(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// A plain A2A client sends JSON arguments as text.
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: `{"word": "Hi"}`})
	task := sendMessage(t, s.client(t, PathSVG), msg)
	wantState(t, task, a2a.TaskStateCompleted)
	if files := taskFiles(t, task); len(files) != 1 || files[0].name != "Hi.svg" {
		t.Errorf("files = %+v, want Hi.svg", files)
	}
}
