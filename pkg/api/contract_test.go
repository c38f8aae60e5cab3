package api_test

// Contract tests: the real local stack (scripted demo model, embedded
// Valkey, demo A2A agents, local Step Functions engine) answers every route
// of docs/api/openapi.yaml, and every response the tests receive is validated against
// docs/api/openapi.yaml (status, content type, headers, body schema).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/devstack"
)

const specPath = "../../docs/api/openapi.yaml"

func init() {
	// The event stream's body is text; its events are checked by the tests
	// that read them.
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	})
}

// loadSpec loads and validates docs/api/openapi.yaml.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		t.Fatalf("load %s: %v", specPath, err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", specPath, err)
	}
	return doc
}

// TestOpenAPIDocument checks that the document is valid OpenAPI 3.1, covers
// every route of docs/api/openapi.yaml, and that its schemas reject what the contract
// forbids (so the contract tests below can fail).
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	// docs/api/openapi.yaml's route table, exactly.
	wantRoutes := []string{
		"DELETE /v1/conversations/{cid}",
		"GET /v1/catalog",
		"GET /v1/conversations",
		"GET /v1/conversations/{cid}",
		"GET /v1/conversations/{cid}/artifacts/{aid}",
		"GET /v1/conversations/{cid}/events",
		"GET /v1/conversations/{cid}/turns/{tid}",
		"GET /v1/events",
		"GET /v1/info",
		"PATCH /v1/conversations/{cid}",
		"POST /v1/conversations",
		"POST /v1/conversations/{cid}/artifacts",
		"POST /v1/conversations/{cid}/messages",
		"POST /v1/conversations/{cid}/turns/{tid}/cancel",
		"POST /v1/conversations/{cid}/turns/{tid}/input",
	}
	var gotRoutes []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			gotRoutes = append(gotRoutes, method+" "+path)
			if op.Responses.Status(http.StatusUnauthorized) == nil {
				t.Errorf("%s %s: no 401 response", method, path)
			}
			if op.Responses.Status(http.StatusInternalServerError) == nil {
				t.Errorf("%s %s: no 500 response", method, path)
			}
			if op.Responses.Status(http.StatusServiceUnavailable) == nil {
				t.Errorf("%s %s: no 503 response (store_unavailable, store_full)", method, path)
			}
			if strings.Contains(path, "{cid}") && op.Responses.Status(http.StatusNotFound) == nil {
				t.Errorf("%s %s: no 404 response", method, path)
			}
		}
	}
	slices.Sort(gotRoutes)
	if diff := cmp.Diff(wantRoutes, gotRoutes); diff != "" {
		t.Errorf("routes (-docs/api/openapi.yaml +openapi.yaml):\n%s", diff)
	}

	turn := func(extra string) string {
		return `{"turn_id":"t_1","text":"hi","started_at":"2026-01-02T03:04:05.000Z","artifacts":[],"steps":[],"llm_calls":1,"tokens":10` + extra + `}`
	}
	form := `,"form":{"calls":[{"call_id":"c1","tool":"design_valve_flange","fields":[{"name":"material","type":"string","description":"Flange material.","required":true,"enum":["steel"]}]}]}`
	approval := `,"approval":{"id":"ap_1","calls":[{"call_id":"c1","tool":"publish_artifact","arguments":{"artifact_id":"a_1"}}]}`
	tests := []struct {
		name, schema, body string
		valid              bool
	}{
		{"running turn", "Turn", turn(`,"status":"running"`), true},
		{"succeeded turn with reply", "Turn", turn(`,"status":"succeeded","reply":"done"`), true},
		{"succeeded turn without reply", "Turn", turn(`,"status":"succeeded"`), false},
		{"failed turn without reply", "Turn", turn(`,"status":"failed"`), false},
		{"unknown status", "Turn", turn(`,"status":"done","reply":"x"`), false},
		{"awaiting_input with form", "Turn", turn(`,"status":"awaiting_input"` + form), true},
		{"awaiting_input without form", "Turn", turn(`,"status":"awaiting_input"`), false},
		{"form while running", "Turn", turn(`,"status":"running"` + form), false},
		{"awaiting_approval with approval", "Turn", turn(`,"status":"awaiting_approval"` + approval), true},
		{"awaiting_approval without approval", "Turn", turn(`,"status":"awaiting_approval"`), false},
		{"approval while awaiting_input", "Turn", turn(`,"status":"awaiting_input"` + form + approval), false},
		{"turn without steps", "Turn", `{"turn_id":"t","status":"running","text":"","started_at":"2026-01-02T03:04:05Z","artifacts":[],"llm_calls":0,"tokens":0}`, false},
		{"form field of unknown type", "FormField", `{"name":"x","type":"date","description":"","required":true}`, false},
		{"finished step without ended_at", "Step", `{"tool":"llm","status":"succeeded","started_at":"2026-01-02T03:04:05Z"}`, false},
		{"running step", "Step", `{"tool":"llm","status":"running","started_at":"2026-01-02T03:04:05Z"}`, true},
		{"catalog with null workflows", "Catalog", `{"skills":[],"workflows":null}`, false},
		{"skill without requires_approval", "Catalog", `{"skills":[{"name":"s","description":"d","input_schema":{}}],"workflows":[]}`, false},
		{"error", "Error", `{"error":{"code":"not_found","message":"no such conversation"}}`, true},
		{"error without message", "Error", `{"error":{"code":"not_found"}}`, false},
		{"bare error string", "Error", `{"error":"not found"}`, false},
		{"message with unknown field", "MessageRequest", `{"text":"hi","foo":1}`, false},
		{"message over 16000 characters", "MessageRequest", `{"text":"` + strings.Repeat("é", 16001) + `"}`, false},
		{"message of 16000 two-byte characters", "MessageRequest", `{"text":"` + strings.Repeat("é", 16000) + `"}`, true},
		{"input with both", "InputRequest", `{"answers":{"c1":{"material":"steel"}},"approval":{"id":"ap_1","decision":"approve"}}`, false},
		{"input approval without id", "InputRequest", `{"approval":{"decision":"approve"}}`, false},
		{"input approve with edited arguments and files", "InputRequest", `{"approval":{"id":"ap_1","decision":"approve","arguments":{"c1":{"channel":"print"}}},"files":["a_1"]}`, true},
		{"input with neither", "InputRequest", `{}`, false},
		{"input with unknown decision", "InputRequest", `{"approval":{"decision":"maybe"}}`, false},
		{"input approve with note", "InputRequest", `{"approval":{"id":"ap_1","decision":"approve","note":"fine"}}`, true},
		{"history entry without turn_id", "HistoryEntry", `{"role":"user","kind":"message","at":"2026-01-02T03:04:05Z"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ref := doc.Components.Schemas[tc.schema]
			if ref == nil {
				t.Fatalf("no schema %s", tc.schema)
			}
			var v any
			if err := json.Unmarshal([]byte(tc.body), &v); err != nil {
				t.Fatal(err)
			}
			err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
			if got := err == nil; got != tc.valid {
				t.Errorf("%s.VisitJSON(%s) valid = %v, want %v (err: %v)", tc.schema, trim(tc.body), got, tc.valid, err)
			}
		})
	}
}

// stack is one running local stack shared by the contract tests.
type stack struct {
	base    string
	dataDir string
	router  routers.Router
	hc      *http.Client
	dev     string // token of the user dev
	mallory string // token of the user mallory
}

// req is one API request.
type req struct {
	method, path string
	token        string // the full Authorization header value is "Bearer "+token; see header
	header       string // a raw Authorization header (overrides token when set)
	noAuth       bool   // send no Authorization header at all
	body         []byte
	contentType  string // default application/json when body is set; noContentType sends none
	chunked      bool   // hide the length so the server must count the bytes
}

// noContentType asks do to send a body without a Content-Type header.
const noContentType = "-"

// mediaType is the Content-Type header r sends ("" for none).
func (r req) mediaType() string {
	switch {
	case r.contentType == noContentType:
		return ""
	case r.contentType != "":
		return r.contentType
	case r.body != nil:
		return "application/json"
	}
	return ""
}

// resp is the API's answer.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.Status, trim(string(r.Body))) }

// errorCode is the error code of an error answer.
func (r resp) errorCode() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// do sends r and validates the answer against openapi.yaml: the route and
// status must be documented, the content type and body must match.
// Requests the server accepted (2xx) must be valid requests of the
// document too, so the document does not forbid what the server allows.
func (s *stack) do(t *testing.T, r req) resp {
	t.Helper()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(body) // not a *bytes.Reader: no Content-Length
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, r.method, s.base+r.path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	switch {
	case r.noAuth:
	case r.header != "":
		hr.Header.Set("Authorization", r.header)
	default:
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if mt := r.mediaType(); mt != "" {
		hr.Header.Set("Content-Type", mt)
	}
	hresp, err := s.hc.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(hresp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", r.method, r.path, err)
	}
	out := resp{Status: hresp.StatusCode, Header: hresp.Header, Body: data}
	s.validate(t, r, out)
	return out
}

func (s *stack) validate(t *testing.T, r req, out resp) {
	t.Helper()
	// A fresh request for the router: same method, URL and headers.
	vr, _ := http.NewRequest(r.method, s.base+r.path, bytes.NewReader(r.body))
	if mt := r.mediaType(); mt != "" {
		vr.Header.Set("Content-Type", mt)
	}
	route, params, err := s.router.FindRoute(vr)
	if err != nil && out.Status == http.StatusMethodNotAllowed && out.errorCode() == "method_not_allowed" {
		return // a method the document does not route: the 405 is the answer
	}
	if err != nil {
		t.Errorf("%s %s: no route in openapi.yaml: %v", r.method, r.path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{
		Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	if out.Status/100 == 2 && (r.body == nil || r.mediaType() == "application/json") {
		if err := openapi3filter.ValidateRequest(t.Context(), in); err != nil {
			t.Errorf("%s %s: the server accepted (%d) a request openapi.yaml forbids: %v", r.method, r.path, out.Status, err)
		}
	}
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 out.Status,
		Header:                 out.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	rin.SetBodyBytes(out.Body)
	if err := openapi3filter.ValidateResponse(t.Context(), rin); err != nil {
		t.Errorf("%s %s: the response does not match openapi.yaml: %v\nresponse: %s", r.method, r.path, err, out)
	}
	if out.Status == http.StatusNoContent && len(out.Body) != 0 {
		t.Errorf("%s %s: 204 with a body %q", r.method, r.path, trim(string(out.Body)))
	}
}

// expect sends r and fails the test unless the status (and, for errors,
// the code) is as wanted.
func (s *stack) expect(t *testing.T, r req, status int, code string) resp {
	t.Helper()
	out := s.do(t, r)
	if out.Status != status {
		t.Fatalf("%s %s = %s, want %d", r.method, r.path, out, status)
	}
	if code != "" && out.errorCode() != code {
		t.Fatalf("%s %s error code = %q, want %q (%s)", r.method, r.path, out.errorCode(), code, out)
	}
	return out
}

func decodeInto[T any](t *testing.T, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
	return v
}

// Wire shapes the tests read (the document checks the rest).
type (
	turnView struct {
		TurnID string `json:"turn_id"`
		Status string `json:"status"`
		Reply  string `json:"reply"`
		Form   *struct {
			Calls []struct {
				CallID string `json:"call_id"`
				Tool   string `json:"tool"`
				Fields []struct {
					Name string   `json:"name"`
					Type string   `json:"type"`
					Enum []string `json:"enum"`
				} `json:"fields"`
			} `json:"calls"`
		} `json:"form"`
		Approval *struct {
			ID    string `json:"id"`
			Calls []struct {
				CallID    string         `json:"call_id"`
				Tool      string         `json:"tool"`
				Arguments map[string]any `json:"arguments"`
			} `json:"calls"`
		} `json:"approval"`
		Artifacts []artifactRef `json:"artifacts"`
		LLMCalls  int           `json:"llm_calls"`
	}
	artifactRef struct {
		ID       string `json:"artifact_id"`
		Name     string `json:"name"`
		MimeType string `json:"mime_type"`
	}
	started struct {
		TurnID string `json:"turn_id"`
		Status string `json:"status"`
	}
)

func (s *stack) newConversation(t *testing.T, token string) string {
	t.Helper()
	out := s.expect(t, req{method: "POST", path: "/v1/conversations", token: token}, http.StatusCreated, "")
	return decodeInto[struct {
		ID string `json:"conversation_id"`
	}](t, out).ID
}

func (s *stack) send(t *testing.T, token, cid, text string) string {
	t.Helper()
	out := s.expect(t, req{method: "POST", path: "/v1/conversations/" + cid + "/messages", token: token, body: jsonBody(map[string]any{"text": text})}, http.StatusAccepted, "")
	st := decodeInto[started](t, out)
	if st.TurnID == "" {
		t.Fatalf("POST messages %q = %s, want a turn id", text, out)
	}
	return st.TurnID
}

// wait polls the turn until it is no longer running; every poll answer is
// validated against the document.
func (s *stack) wait(t *testing.T, token, cid, tid string) turnView {
	t.Helper()
	return s.waitUntil(t, token, cid, tid, func(v turnView) bool { return v.Status != "running" })
}

// waitFinal polls the turn until it has ended (it may pause again on the
// way, so "not running" is not enough after a reply).
func (s *stack) waitFinal(t *testing.T, token, cid, tid string) turnView {
	t.Helper()
	return s.waitUntil(t, token, cid, tid, func(v turnView) bool {
		switch v.Status {
		case "succeeded", "failed", "expired", "superseded":
			return true
		}
		return false
	})
}

func (s *stack) waitUntil(t *testing.T, token, cid, tid string, done func(turnView) bool) turnView {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		out := s.expect(t, req{method: "GET", path: "/v1/conversations/" + cid + "/turns/" + tid, token: token}, http.StatusOK, "")
		v := decodeInto[turnView](t, out)
		if v.TurnID != tid {
			t.Fatalf("GET turn %s: turn_id = %q", tid, v.TurnID)
		}
		if done(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %s not done after 90s: %s", tid, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *stack) upload(t *testing.T, token, cid, name, mime string, data []byte) artifactRef {
	t.Helper()
	out := s.expect(t, req{method: "POST", path: "/v1/conversations/" + cid + "/artifacts?name=" + url.QueryEscape(name), token: token, body: data, contentType: mime}, http.StatusCreated, "")
	return decodeInto[artifactRef](t, out)
}

func startStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	st, err := devstack.Start(t.Context(), devstack.Config{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatalf("devstack.Start: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	s := &stack{base: st.URL(), dataDir: dir, hc: &http.Client{Timeout: 60 * time.Second}}
	if s.dev, err = st.Token("dev"); err != nil {
		t.Fatal(err)
	}
	if s.mallory, err = st.Token("mallory"); err != nil {
		t.Fatal(err)
	}
	doc := loadSpec(t)
	doc.Servers = openapi3.Servers{{URL: s.base}}
	if s.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatalf("router: %v", err)
	}
	return s
}

// pngBytes is a 1×1 PNG.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")

// fixture is a conversation of dev with one upload and one finished turn,
// the target of the auth and isolation tables.
type fixture struct {
	cid, tid, aid string
}

func TestContract(t *testing.T) {
	t.Parallel()
	s := startStack(t)

	var (
		fx     fixture
		fxOnce sync.Once
	)
	// getFixture builds the fixture once: "Create a PNG image with the word
	// Popelnase" (docs/design.md §2 scenario 1) ends succeeded with a PNG artifact.
	getFixture := func(t *testing.T) fixture {
		t.Helper()
		fxOnce.Do(func() {
			fx.cid = s.newConversation(t, s.dev)
			fx.aid = s.upload(t, s.dev, fx.cid, "dot.png", "image/png", pngBytes).ID
			fx.tid = s.send(t, s.dev, fx.cid, "Create a PNG image with the word Popelnase")
			v := s.wait(t, s.dev, fx.cid, fx.tid)
			if v.Status != "succeeded" {
				t.Fatalf("Popelnase turn = %+v, want succeeded", v)
			}
			if !slices.ContainsFunc(v.Artifacts, func(a artifactRef) bool { return a.MimeType == "image/png" }) {
				t.Fatalf("Popelnase turn artifacts = %+v, want a PNG", v.Artifacts)
			}
			if v.Form != nil || v.Approval != nil || v.LLMCalls < 1 || v.Reply == "" {
				t.Fatalf("Popelnase turn = %+v, want a reply, llm_calls ≥ 1, no form or approval", v)
			}
		})
		if fx.tid == "" {
			t.Fatal("the fixture could not be built (see the first failure)")
		}
		return fx
	}

	t.Run("Auth", func(t *testing.T) {
		t.Parallel()
		testAuth(t, s, getFixture(t))
	})
	t.Run("OtherUsersConversation", func(t *testing.T) {
		t.Parallel()
		testIsolation(t, s, getFixture(t))
	})
	t.Run("Conversations", func(t *testing.T) {
		t.Parallel()
		testConversations(t, s, getFixture(t))
	})
	t.Run("Artifacts", func(t *testing.T) {
		t.Parallel()
		testArtifacts(t, s, getFixture(t))
	})
	t.Run("Messages", func(t *testing.T) {
		t.Parallel()
		testMessages(t, s, getFixture(t))
	})
	t.Run("TurnsAndInput", func(t *testing.T) {
		t.Parallel()
		testInputErrors(t, s, getFixture(t))
	})
	t.Run("FormRoundTrip", func(t *testing.T) {
		t.Parallel()
		testFormRoundTrip(t, s)
	})
	t.Run("Approval", func(t *testing.T) {
		t.Parallel()
		testApproval(t, s)
	})
	t.Run("YesRepliesToApproval", func(t *testing.T) {
		t.Parallel()
		testYesReply(t, s)
	})
	t.Run("Supersede", func(t *testing.T) {
		t.Parallel()
		testSupersede(t, s)
	})
	t.Run("Catalog", func(t *testing.T) {
		t.Parallel()
		testCatalog(t, s)
	})
	t.Run("Live", func(t *testing.T) {
		t.Parallel()
		testLive(t, s, getFixture(t))
	})
}

// everyRoute lists one request per route of docs/api/openapi.yaml against fx.
func everyRoute(fx fixture) []req {
	c := "/v1/conversations/" + fx.cid
	return []req{
		{method: "POST", path: "/v1/conversations"},
		{method: "GET", path: "/v1/conversations"},
		{method: "GET", path: c},
		{method: "DELETE", path: c},
		{method: "POST", path: c + "/artifacts?name=x.txt", body: []byte("hello"), contentType: "text/plain"},
		{method: "GET", path: c + "/artifacts/" + fx.aid},
		{method: "POST", path: c + "/messages", body: jsonBody(map[string]any{"text": "Create a PNG image with the word Popelnase"})},
		{method: "GET", path: c + "/turns/" + fx.tid},
		{method: "POST", path: c + "/turns/" + fx.tid + "/input", body: jsonBody(map[string]any{"approval": map[string]any{"id": "ap_x", "decision": "approve"}})},
		{method: "POST", path: c + "/turns/" + fx.tid + "/cancel"},
		{method: "GET", path: c + "/events?timeout=1"},
		{method: "PATCH", path: c, body: jsonBody(map[string]any{"title": "renamed"})},
		{method: "GET", path: "/v1/catalog"},
	}
}

// testLive covers the routes of live turns (issue 15) against the
// document: rename, cancel (202 for a waiting turn, 409 turn_ended for an
// ended one, saying how), the event stream's headers, 405 for a method a
// route does not take, and a 409 not_waiting that says why.
func testLive(t *testing.T, s *stack, fx fixture) {
	c := "/v1/conversations/" + fx.cid
	r := s.expect(t, req{method: "PATCH", path: c, token: s.dev, body: jsonBody(map[string]any{"title": "  Popelnase   pictures "})}, http.StatusOK, "")
	if sum := decodeInto[struct{ Title string }](t, r); sum.Title != "Popelnase pictures" {
		t.Errorf("renamed title = %q, want the title with its spaces folded", sum.Title)
	}
	s.expect(t, req{method: "PATCH", path: c, token: s.dev, body: jsonBody(map[string]any{"title": " "})}, http.StatusBadRequest, "missing_title")
	r = s.expect(t, req{method: "POST", path: c + "/turns/" + fx.tid + "/cancel", token: s.dev}, http.StatusConflict, "turn_ended")
	if !strings.Contains(string(r.Body), "succeeded") {
		t.Errorf("cancel of an ended turn = %s, want the message to say it succeeded", r)
	}
	r = s.expect(t, req{method: "POST", path: c + "/turns/" + fx.tid + "/input", token: s.dev, body: jsonBody(map[string]any{"answers": map[string]any{"x": map[string]any{"a": 1}}})}, http.StatusConflict, "not_waiting")
	if !strings.Contains(string(r.Body), "has ended (succeeded)") {
		t.Errorf("answer to an ended turn = %s, want the message to say it has ended", r)
	}
	r = s.do(t, req{method: "PUT", path: "/v1/conversations", token: s.dev})
	if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "POST, GET" || r.errorCode() != "method_not_allowed" {
		t.Errorf("PUT /v1/conversations = %s (Allow %q), want 405 method_not_allowed with Allow", r, r.Header.Get("Allow"))
	}
	r = s.do(t, req{method: "GET", path: c + "/events?timeout=1&turn=" + fx.tid, token: s.dev})
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(r.Body), "event: turn.ended") {
		t.Errorf("GET events of an ended turn = %s, want its events up to turn.ended", r)
	}
	// A waiting turn cancels: 202 cancelled with a message, its form gone.
	cid := s.newConversation(t, s.dev)
	tid := s.send(t, s.dev, cid, "Design a valve flange with 6 holes and 120 mm outer diameter")
	s.waitUntil(t, s.dev, cid, tid, func(v turnView) bool { return v.Status == "awaiting_input" })
	r = s.expect(t, req{method: "POST", path: "/v1/conversations/" + cid + "/turns/" + tid + "/cancel", token: s.dev}, http.StatusAccepted, "")
	if v := decodeInto[turnView](t, r); v.Status != "cancelled" || v.Reply == "" || v.Form != nil {
		t.Errorf("cancelled turn = %+v, want cancelled with a reply and no form", v)
	}
}

// testAuth: a missing, malformed, expired or wrongly signed token is 401 on
// every route (docs/api/openapi.yaml "Auth"), and changes nothing.
func testAuth(t *testing.T, s *stack, fx fixture) {
	key, err := os.ReadFile(filepath.Join(s.dataDir, "signing.key"))
	if err != nil {
		t.Fatalf("read the stack's signing key: %v", err)
	}
	expired, _ := (&auth.Local{Key: key, TTL: -time.Minute}).Mint("dev")
	wrongKey, _ := (&auth.Local{Key: []byte("not-the-stack-key-not-the-stack-")}).Mint("dev")
	unsigned, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.RegisteredClaims{
		Subject: "dev", Issuer: "clientagent-local", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	// A valid signature over a tampered payload: dev's token with mallory's claims.
	parts := strings.Split(s.dev, ".")
	malloryParts := strings.Split(s.mallory, ".")
	tampered := parts[0] + "." + malloryParts[1] + "." + parts[2]

	tokens := []struct {
		name, header string
		noAuth       bool
	}{
		{name: "missing", noAuth: true},
		{name: "empty bearer", header: "Bearer "},
		{name: "basic scheme", header: "Basic ZGV2OmRldg=="},
		{name: "token without scheme", header: s.dev},
		{name: "malformed", header: "Bearer not-a-jwt"},
		{name: "three garbage parts", header: "Bearer abc.def.ghi"},
		{name: "wrongly signed", header: "Bearer " + wrongKey},
		{name: "tampered payload", header: "Bearer " + tampered},
		{name: "alg none", header: "Bearer " + unsigned},
		{name: "expired", header: "Bearer " + expired},
	}
	t.Run("routes", func(t *testing.T) {
		for _, r := range everyRoute(fx) {
			for _, tok := range tokens {
				t.Run(r.method+" "+r.path+"/"+tok.name, func(t *testing.T) {
					t.Parallel()
					r := r // a copy per subtest: r is shared by the token loop
					r.header, r.noAuth = tok.header, tok.noAuth
					s.expect(t, r, http.StatusUnauthorized, "unauthorized")
				})
			}
		}
	})
	// Nothing above may have deleted or changed dev's conversation.
	s.expect(t, req{method: "GET", path: "/v1/conversations/" + fx.cid, token: s.dev}, http.StatusOK, "")
}

// testIsolation: every conversation route answers 404 for someone else's
// conversation, exactly like a missing one (docs/api/openapi.yaml "Auth"), and changes
// nothing of it.
func testIsolation(t *testing.T, s *stack, fx fixture) {
	t.Run("routes", func(t *testing.T) {
		for _, r := range everyRoute(fx) {
			if !strings.Contains(r.path, fx.cid) {
				continue
			}
			t.Run("mallory "+r.method+" "+r.path, func(t *testing.T) {
				t.Parallel()
				r := r // a copy per subtest: r is shared by both subtests
				r.token = s.mallory
				s.expect(t, r, http.StatusNotFound, "not_found")
			})
			t.Run("missing conversation "+r.method+" "+r.path, func(t *testing.T) {
				t.Parallel()
				r := r
				r.token = s.dev
				r.path = strings.Replace(r.path, fx.cid, "c_doesnotexist", 1)
				s.expect(t, r, http.StatusNotFound, "not_found")
			})
		}
		t.Run("mallory's list", func(t *testing.T) {
			t.Parallel()
			out := s.expect(t, req{method: "GET", path: "/v1/conversations", token: s.mallory}, http.StatusOK, "")
			if bytes.Contains(out.Body, []byte(fx.cid)) {
				t.Errorf("mallory's list %s names dev's conversation %s", out, fx.cid)
			}
		})
	})
	// Nothing of mallory's reached dev's conversation.
	out := s.expect(t, req{method: "GET", path: "/v1/conversations/" + fx.cid, token: s.dev}, http.StatusOK, "")
	conv := decodeInto[struct {
		Turns     []turnView    `json:"turns"`
		Artifacts []artifactRef `json:"artifacts"`
	}](t, out)
	if len(conv.Turns) != 1 || conv.Turns[0].TurnID != fx.tid {
		t.Errorf("after mallory's requests dev's conversation has turns %+v, want only %s", conv.Turns, fx.tid)
	}
	if slices.ContainsFunc(conv.Artifacts, func(a artifactRef) bool { return a.Name == "x.txt" }) {
		t.Errorf("mallory's upload landed in dev's conversation: %+v", conv.Artifacts)
	}
}

func testConversations(t *testing.T, s *stack, fx fixture) {
	t.Run("create", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name   string
			body   []byte
			status int
			code   string
		}{
			{"no body", nil, http.StatusCreated, ""},
			{"empty object", []byte(`{}`), http.StatusCreated, ""},
			{"title", []byte(`{"title":"Flanges"}`), http.StatusCreated, ""},
			{"not JSON", []byte(`title=x`), http.StatusBadRequest, "invalid_json"},
			{"unknown field", []byte(`{"name":"x"}`), http.StatusBadRequest, "invalid_json"},
			{"title of the wrong type", []byte(`{"title":5}`), http.StatusBadRequest, "invalid_json"},
			{"too large", jsonBody(map[string]string{"title": strings.Repeat("x", 5000)}), http.StatusRequestEntityTooLarge, "too_large"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				s.expect(t, req{method: "POST", path: "/v1/conversations", token: s.dev, body: tc.body}, tc.status, tc.code)
			})
		}
	})

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		cid := s.newConversation(t, s.mallory) // mallory's own list is independent of dev's traffic
		out := s.expect(t, req{method: "GET", path: "/v1/conversations", token: s.mallory}, http.StatusOK, "")
		list := decodeInto[struct {
			Conversations []struct {
				ID     string `json:"conversation_id"`
				Status string `json:"status"`
			} `json:"conversations"`
		}](t, out)
		i := slices.IndexFunc(list.Conversations, func(c struct {
			ID     string `json:"conversation_id"`
			Status string `json:"status"`
		}) bool {
			return c.ID == cid
		})
		if i < 0 {
			t.Fatalf("GET /v1/conversations = %s, want %s listed", out, cid)
		}
		if got := list.Conversations[i].Status; got != "idle" {
			t.Errorf("status of a conversation without turns = %q, want idle", got)
		}
		out = s.expect(t, req{method: "GET", path: "/v1/conversations", token: s.dev}, http.StatusOK, "")
		devList := decodeInto[struct {
			Conversations []struct {
				ID     string `json:"conversation_id"`
				Title  string `json:"title"`
				Status string `json:"status"`
			} `json:"conversations"`
		}](t, out)
		found := false
		for _, c := range devList.Conversations {
			if c.ID != fx.cid {
				continue
			}
			found = true
			// The title comes from the first message; the status is the last turn's.
			if !strings.Contains(c.Title, "Popelnase") || c.Status != "succeeded" {
				t.Errorf("dev's list entry %+v, want a title from the first message and status succeeded", c)
			}
		}
		if !found {
			t.Errorf("dev's list %s does not name %s", out, fx.cid)
		}
	})

	t.Run("get", func(t *testing.T) {
		t.Parallel()
		out := s.expect(t, req{method: "GET", path: "/v1/conversations/" + fx.cid, token: s.dev}, http.StatusOK, "")
		conv := decodeInto[struct {
			ID      string `json:"conversation_id"`
			History []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
				TurnID  string `json:"turn_id"`
			} `json:"history"`
			Artifacts []artifactRef `json:"artifacts"`
			Turns     []turnView    `json:"turns"`
		}](t, out)
		if conv.ID != fx.cid {
			t.Errorf("conversation_id = %q, want %q", conv.ID, fx.cid)
		}
		if len(conv.History) == 0 || conv.History[0].Role != "user" || conv.History[0].Content != "Create a PNG image with the word Popelnase" || conv.History[0].TurnID != fx.tid {
			t.Errorf("history = %+v, want the user's message of turn %s first", conv.History, fx.tid)
		}
		if !slices.ContainsFunc(conv.Artifacts, func(a artifactRef) bool { return a.ID == fx.aid && a.Name == "dot.png" }) {
			t.Errorf("artifacts = %+v, want the upload %s", conv.Artifacts, fx.aid)
		}
		if len(conv.Turns) != 1 || conv.Turns[0].Status != "succeeded" {
			t.Errorf("turns = %+v, want the one succeeded turn", conv.Turns)
		}
	})

	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		cid := s.newConversation(t, s.dev)
		aid := s.upload(t, s.dev, cid, "a.txt", "text/plain", []byte("bye")).ID
		path := "/v1/conversations/" + cid
		s.expect(t, req{method: "DELETE", path: path, token: s.dev}, http.StatusNoContent, "")
		s.expect(t, req{method: "GET", path: path, token: s.dev}, http.StatusNotFound, "not_found")
		s.expect(t, req{method: "GET", path: path + "/artifacts/" + aid, token: s.dev}, http.StatusNotFound, "not_found")
		s.expect(t, req{method: "DELETE", path: path, token: s.dev}, http.StatusNotFound, "not_found")
	})

	t.Run("delete a waiting conversation", func(t *testing.T) {
		t.Parallel()
		cid := s.newConversation(t, s.dev)
		tid := s.send(t, s.dev, cid, "Design a valve flange with 4 holes")
		if v := s.wait(t, s.dev, cid, tid); v.Status != "awaiting_input" {
			t.Fatalf("flange turn = %+v, want awaiting_input", v)
		}
		s.expect(t, req{method: "DELETE", path: "/v1/conversations/" + cid, token: s.dev}, http.StatusNoContent, "")
		s.expect(t, req{method: "GET", path: "/v1/conversations/" + cid + "/turns/" + tid, token: s.dev}, http.StatusNotFound, "not_found")
	})
}

func testArtifacts(t *testing.T, s *stack, fx fixture) {
	cid := s.newConversation(t, s.dev)
	base := "/v1/conversations/" + cid + "/artifacts"
	const limit = 20 << 20 // the local stack's upload limit
	tests := []struct {
		name    string
		query   string
		body    []byte
		mime    string
		chunked bool
		status  int
		code    string
	}{
		{"png", "?name=dot.png", pngBytes, "image/png", false, http.StatusCreated, ""},
		{"no content type", "?name=blob.bin", []byte{0, 1, 2}, noContentType, false, http.StatusCreated, ""},
		{"empty file", "?name=empty.txt", []byte{}, "text/plain", false, http.StatusCreated, ""},
		{"exactly the limit", "?name=big.bin", make([]byte, limit), "application/octet-stream", true, http.StatusCreated, ""},
		{"without name", "", []byte("x"), "text/plain", false, http.StatusBadRequest, "invalid_name"},
		{"empty name", "?name=", []byte("x"), "text/plain", false, http.StatusBadRequest, "invalid_name"},
		{"name with a slash", "?name=" + url.QueryEscape("../etc/passwd"), []byte("x"), "text/plain", false, http.StatusBadRequest, "invalid_name"},
		{"name too long", "?name=" + strings.Repeat("n", 201), []byte("x"), "text/plain", false, http.StatusBadRequest, "invalid_name"},
		{"over the limit, declared", "?name=huge.bin", make([]byte, limit+1), "application/octet-stream", false, http.StatusRequestEntityTooLarge, "too_large"},
		{"over the limit, chunked", "?name=huge.bin", make([]byte, limit+1), "application/octet-stream", true, http.StatusRequestEntityTooLarge, "too_large"},
	}
	for _, tc := range tests {
		t.Run("upload "+tc.name, func(t *testing.T) {
			// Not parallel: two 20 MiB bodies at once are heavy on a shared machine.
			out := s.expect(t, req{method: "POST", path: base + tc.query, token: s.dev, body: tc.body, contentType: tc.mime, chunked: tc.chunked}, tc.status, tc.code)
			if tc.status != http.StatusCreated {
				return
			}
			a := decodeInto[artifactRef](t, out)
			wantMime := tc.mime
			if wantMime == noContentType {
				wantMime = "application/octet-stream"
			}
			name, _ := url.ParseQuery(strings.TrimPrefix(tc.query, "?"))
			if diff := cmp.Diff(artifactRef{ID: a.ID, Name: name.Get("name"), MimeType: wantMime}, a); diff != "" || a.ID == "" {
				t.Errorf("upload answer (-want +got):\n%s", diff)
			}
			// The bytes come back with their content type.
			got := s.expect(t, req{method: "GET", path: base + "/" + a.ID, token: s.dev}, http.StatusOK, "")
			if !bytes.Equal(got.Body, tc.body) {
				t.Errorf("download of %s: %d bytes, want the %d uploaded", a.ID, len(got.Body), len(tc.body))
			}
			if ct := got.Header.Get("Content-Type"); ct != wantMime {
				t.Errorf("download Content-Type = %q, want %q", ct, wantMime)
			}
		})
	}
	t.Run("download", func(t *testing.T) {
		tests := []struct {
			name, path string
			status     int
			mime       string
		}{
			{"upload", "/v1/conversations/" + fx.cid + "/artifacts/" + fx.aid, http.StatusOK, "image/png"},
			{"unknown id", "/v1/conversations/" + fx.cid + "/artifacts/a_doesnotexist", http.StatusNotFound, ""},
			{"another conversation's artifact", base + "/" + fx.aid, http.StatusNotFound, ""},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				out := s.expect(t, req{method: "GET", path: tc.path, token: s.dev}, tc.status, map[bool]string{true: "not_found"}[tc.status == http.StatusNotFound])
				if tc.status == http.StatusOK {
					if ct := out.Header.Get("Content-Type"); ct != tc.mime || !bytes.Equal(out.Body, pngBytes) {
						t.Errorf("download = %s %d bytes, want %s and the uploaded bytes", ct, len(out.Body), tc.mime)
					}
				}
			})
		}
	})
}

func testMessages(t *testing.T, s *stack, fx fixture) {
	cid := s.newConversation(t, s.dev)
	other := s.newConversation(t, s.dev)
	up := s.upload(t, s.dev, cid, "dot.png", "image/png", pngBytes)
	path := "/v1/conversations/" + cid + "/messages"
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"not JSON", `hello`, http.StatusBadRequest, "invalid_json"},
		{"JSON array", `["hello"]`, http.StatusBadRequest, "invalid_json"},
		{"empty body", ``, http.StatusBadRequest, "invalid_json"},
		{"missing text", `{}`, http.StatusBadRequest, "missing_text"},
		{"blank text", `{"text":"  \n "}`, http.StatusBadRequest, "missing_text"},
		{"unknown field", `{"text":"hi","attachments":[]}`, http.StatusBadRequest, "invalid_json"},
		{"text of the wrong type", `{"text":42}`, http.StatusBadRequest, "invalid_json"},
		{"text over 16000 characters", string(jsonBody(map[string]string{"text": strings.Repeat("a", 16001)})), http.StatusRequestEntityTooLarge, "text_too_long"},
		{"body far over the limit", string(jsonBody(map[string]any{"text": "hi", "files": []string{strings.Repeat("a", 300<<10)}})), http.StatusRequestEntityTooLarge, "too_large"},
		{"unknown file id", `{"text":"describe it","files":["a_doesnotexist"]}`, http.StatusBadRequest, "unknown_file"},
		{"another conversation's file", string(jsonBody(map[string]any{"text": "describe it", "files": []string{fx.aid}})), http.StatusBadRequest, "unknown_file"},
		{"workflow without id", `{"workflow":{"inputs":{}}}`, http.StatusBadRequest, "invalid_workflow"},
		{"unknown workflow", `{"workflow":{"id":"no_such_workflow"}}`, http.StatusBadRequest, "unknown_workflow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s.expect(t, req{method: "POST", path: path, token: s.dev, body: []byte(tc.body)}, tc.status, tc.code)
		})
	}
	t.Run("accepted", func(t *testing.T) {
		t.Parallel()
		// Each starts a turn: a separate conversation each, so none supersedes another.
		tests := []struct {
			name string
			body func(cid string) any
			cid  string
		}{
			{"text with an uploaded file", func(string) any {
				return map[string]any{"text": "Convert this to a PNG", "files": []string{up.ID}}
			}, cid},
			{"16000 two-byte characters", func(string) any { return map[string]any{"text": strings.Repeat("é", 16000)} }, other},
			// The limit counts characters, however a client encodes them:
			// ASCII-only JSON (Python's json.dumps default) spends 12 bytes on
			// one emoji.
			{"16000 emoji as JSON escapes", func(string) any {
				return json.RawMessage(`{"text":"` + strings.Repeat(`\ud83d\ude00`, 16000) + `"}`)
			}, ""},
			{"workflow", func(string) any {
				return map[string]any{"workflow": map[string]any{"id": "word_to_png", "inputs": map[string]any{"word": "Hi"}}}
			}, ""},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := tc.cid
				if c == "" {
					c = s.newConversation(t, s.dev)
				}
				out := s.expect(t, req{method: "POST", path: "/v1/conversations/" + c + "/messages", token: s.dev, body: jsonBody(tc.body(c))}, http.StatusAccepted, "")
				st := decodeInto[started](t, out)
				if st.Status != "running" {
					t.Errorf("POST messages status = %q, want running", st.Status)
				}
				v := s.wait(t, s.dev, c, st.TurnID)
				switch v.Status {
				case "succeeded", "failed", "awaiting_input", "awaiting_approval":
				default:
					t.Errorf("turn %s ended %q", st.TurnID, v.Status)
				}
			})
		}
	})
}

func testInputErrors(t *testing.T, s *stack, fx fixture) {
	turn := "/v1/conversations/" + fx.cid + "/turns/"
	t.Run("get unknown turn", func(t *testing.T) {
		t.Parallel()
		s.expect(t, req{method: "GET", path: turn + "t_doesnotexist", token: s.dev}, http.StatusNotFound, "not_found")
	})
	tests := []struct {
		name, tid, body string
		status          int
		code            string
	}{
		{"not JSON", fx.tid, `approve`, http.StatusBadRequest, "invalid_json"},
		{"neither answers nor approval", fx.tid, `{}`, http.StatusBadRequest, "invalid_input"},
		{"empty answers", fx.tid, `{"answers":{}}`, http.StatusBadRequest, "invalid_input"},
		{"both", fx.tid, `{"answers":{"c1":{"material":"steel"}},"approval":{"decision":"approve"}}`, http.StatusBadRequest, "invalid_input"},
		{"unknown decision", fx.tid, `{"approval":{"id":"ap_1","decision":"maybe"}}`, http.StatusBadRequest, "invalid_decision"},
		{"approval without its id", fx.tid, `{"approval":{"decision":"approve"}}`, http.StatusBadRequest, "missing_approval_id"},
		{"edited arguments with reject", fx.tid, `{"approval":{"id":"ap_1","decision":"reject","arguments":{"c1":{}}}}`, http.StatusBadRequest, "invalid_edit"},
		{"unknown file", fx.tid, `{"approval":{"id":"ap_1","decision":"approve"},"files":["a_nope"]}`, http.StatusBadRequest, ""},
		{"unknown field", fx.tid, `{"approval":{"id":"ap_1","decision":"approve"},"force":true}`, http.StatusBadRequest, "invalid_json"},
		{"too large", fx.tid, string(jsonBody(map[string]any{"approval": map[string]any{"id": "ap_1", "decision": "approve", "note": strings.Repeat("n", 300<<10)}})), http.StatusRequestEntityTooLarge, "too_large"},
		{"approval when nothing waits", fx.tid, `{"approval":{"id":"ap_1","decision":"approve"}}`, http.StatusConflict, "not_waiting"},
		{"answers when nothing waits", fx.tid, `{"answers":{"c1":{"material":"steel"}}}`, http.StatusConflict, "not_waiting"},
		{"unknown turn", "t_doesnotexist", `{"approval":{"id":"ap_1","decision":"approve"}}`, http.StatusNotFound, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s.expect(t, req{method: "POST", path: turn + tc.tid + "/input", token: s.dev, body: []byte(tc.body)}, tc.status, tc.code)
		})
	}
}

// testFormRoundTrip: a value only the user may give opens a typed form;
// the answer resumes the turn; a second answer is 409 (docs/design.md §3.3).
func testFormRoundTrip(t *testing.T, s *stack) {
	cid := s.newConversation(t, s.dev)
	tid := s.send(t, s.dev, cid, "Design a valve flange with 4 holes")
	v := s.wait(t, s.dev, cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) != 1 {
		t.Fatalf("flange turn = %+v, want awaiting_input with one form call", v)
	}
	call := v.Form.Calls[0]
	if call.Tool != "design_valve_flange" || len(call.Fields) != 1 || call.Fields[0].Name != "material" || call.Fields[0].Type != "string" || !slices.Contains(call.Fields[0].Enum, "steel") {
		t.Fatalf("form call = %+v, want design_valve_flange asking for material (string, enum with steel)", call)
	}
	input := "/v1/conversations/" + cid + "/turns/" + tid + "/input"
	bad := []struct {
		name, body string
		status     int
		code       string
	}{
		{"unknown call", `{"answers":{"c_nope":{"material":"steel"}}}`, http.StatusBadRequest, "unknown_call"},
		{"value outside the enum", string(jsonBody(map[string]any{"answers": map[string]any{call.CallID: map[string]any{"material": "cheese"}}})), http.StatusBadRequest, "invalid_answer"},
		{"approval while a form waits", `{"approval":{"id":"ap_1","decision":"approve"}}`, http.StatusConflict, "not_waiting"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			s.expect(t, req{method: "POST", path: input, token: s.dev, body: []byte(tc.body)}, tc.status, tc.code)
		})
	}
	// The turn still waits after the rejected replies.
	if v := s.wait(t, s.dev, cid, tid); v.Status != "awaiting_input" {
		t.Fatalf("after rejected replies the turn is %q, want awaiting_input", v.Status)
	}

	answer := jsonBody(map[string]any{"answers": map[string]any{call.CallID: map[string]any{"material": "steel"}}})
	out := s.expect(t, req{method: "POST", path: input, token: s.dev, body: answer}, http.StatusAccepted, "")
	if got := decodeInto[turnView](t, out); got.TurnID != tid || got.Status != "running" || got.Form != nil {
		t.Errorf("answer = %+v, want turn %s running without a form", got, tid)
	}
	// The answered form is gone at once: a client polling right after the
	// 202 must not be shown the form again.
	now := decodeInto[turnView](t, s.expect(t, req{method: "GET", path: "/v1/conversations/" + cid + "/turns/" + tid, token: s.dev}, http.StatusOK, ""))
	if now.Status == "awaiting_input" || now.Form != nil {
		t.Errorf("GET right after the answer = %+v, want running (or ended) without the form", now)
	}
	v = s.waitFinal(t, s.dev, cid, tid)
	if v.Status != "succeeded" || v.Form != nil {
		t.Fatalf("after the answer the turn = %+v, want succeeded", v)
	}
	if !slices.ContainsFunc(v.Artifacts, func(a artifactRef) bool { return a.MimeType == "image/svg+xml" && strings.Contains(a.Name, "steel") }) {
		t.Errorf("artifacts = %+v, want the steel flange SVG", v.Artifacts)
	}
	s.expect(t, req{method: "POST", path: input, token: s.dev, body: answer}, http.StatusConflict, "not_waiting")

	// The SVG downloads as SVG, under a policy that keeps its scripts from running.
	for _, a := range v.Artifacts {
		out := s.expect(t, req{method: "GET", path: "/v1/conversations/" + cid + "/artifacts/" + a.ID, token: s.dev}, http.StatusOK, "")
		if ct := out.Header.Get("Content-Type"); ct != a.MimeType {
			t.Errorf("download %s Content-Type = %q, want %q", a.Name, ct, a.MimeType)
		}
		if a.MimeType == "image/svg+xml" && (!bytes.Contains(out.Body, []byte("<svg")) || !strings.Contains(out.Header.Get("Content-Security-Policy"), "default-src 'none'")) {
			t.Errorf("SVG download %s: CSP %q, body %q", a.Name, out.Header.Get("Content-Security-Policy"), trim(string(out.Body)))
		}
	}
}

// approvalTurn makes a Hello SVG, then asks to publish it: the publish
// call waits for approval.
func approvalTurn(t *testing.T, s *stack) (cid, tid string, v turnView) {
	t.Helper()
	cid = s.newConversation(t, s.dev)
	first := s.send(t, s.dev, cid, "Create an SVG with the word Hello")
	if v := s.wait(t, s.dev, cid, first); v.Status != "succeeded" || len(v.Artifacts) == 0 {
		t.Fatalf("SVG turn = %+v, want succeeded with an artifact", v)
	}
	tid = s.send(t, s.dev, cid, "Publish it to web")
	v = s.wait(t, s.dev, cid, tid)
	if v.Status != "awaiting_approval" || v.Approval == nil || len(v.Approval.Calls) != 1 || v.Approval.Calls[0].Tool != "publish_artifact" || v.Form != nil {
		t.Fatalf("publish turn = %+v, want awaiting_approval of publish_artifact", v)
	}
	return cid, tid, v
}

func testApproval(t *testing.T, s *stack) {
	for _, decision := range []string{"approve", "reject"} {
		t.Run(decision, func(t *testing.T) {
			t.Parallel()
			cid, tid, shown := approvalTurn(t, s)
			input := "/v1/conversations/" + cid + "/turns/" + tid + "/input"
			s.expect(t, req{method: "POST", path: input, token: s.dev, body: []byte(`{"answers":{"c1":{"x":1}}}`)}, http.StatusConflict, "not_waiting")
			if shown.Approval.ID == "" {
				t.Fatalf("approval %+v has no id", shown.Approval)
			}
			// docs/api/openapi.yaml: an answer must name the approval shown; another id is stale.
			s.expect(t, req{method: "POST", path: input, token: s.dev, body: jsonBody(map[string]any{"approval": map[string]any{"decision": decision}})}, http.StatusBadRequest, "missing_approval_id")
			s.expect(t, req{method: "POST", path: input, token: s.dev, body: jsonBody(map[string]any{"approval": map[string]any{"id": "ap_stale", "decision": decision}})}, http.StatusConflict, "stale_approval")
			if decision == "approve" {
				bad := map[string]any{shown.Approval.Calls[0].CallID: map[string]any{"artifact_id": 7}}
				s.expect(t, req{method: "POST", path: input, token: s.dev, body: jsonBody(map[string]any{"approval": map[string]any{"id": shown.Approval.ID, "decision": decision, "arguments": bad}})}, http.StatusBadRequest, "invalid_arguments")
				s.expect(t, req{method: "POST", path: input, token: s.dev, body: jsonBody(map[string]any{"approval": map[string]any{"id": shown.Approval.ID, "decision": decision, "arguments": map[string]any{"c_other": map[string]any{}}}})}, http.StatusBadRequest, "invalid_edit")
			}
			body := jsonBody(map[string]any{"approval": map[string]any{"id": shown.Approval.ID, "decision": decision, "note": "contract test"}})
			out := s.expect(t, req{method: "POST", path: input, token: s.dev, body: body}, http.StatusAccepted, "")
			if got := decodeInto[turnView](t, out); got.Status != "running" || got.Approval != nil {
				t.Errorf("approval answer = %+v, want running without approval", got)
			}
			now := decodeInto[turnView](t, s.expect(t, req{method: "GET", path: "/v1/conversations/" + cid + "/turns/" + tid, token: s.dev}, http.StatusOK, ""))
			if now.Status == "awaiting_approval" || now.Approval != nil {
				t.Errorf("GET right after the decision = %+v, want running (or ended) without the approval", now)
			}
			v := s.waitFinal(t, s.dev, cid, tid)
			if v.Status != "succeeded" {
				t.Errorf("after %s the turn = %+v, want succeeded", decision, v)
			}
			s.expect(t, req{method: "POST", path: input, token: s.dev, body: body}, http.StatusConflict, "not_waiting")
		})
	}
}

// testYesReply: a short yes to a pending approval is the decision, not a
// new turn (docs/api/openapi.yaml).
func testYesReply(t *testing.T, s *stack) {
	cid, tid, _ := approvalTurn(t, s)
	out := s.expect(t, req{method: "POST", path: "/v1/conversations/" + cid + "/messages", token: s.dev, body: []byte(`{"text":"Yes"}`)}, http.StatusAccepted, "")
	if got := decodeInto[started](t, out); got.TurnID != tid {
		t.Errorf("yes reply answered turn %q, want the waiting turn %q", got.TurnID, tid)
	}
	now := decodeInto[turnView](t, s.expect(t, req{method: "GET", path: "/v1/conversations/" + cid + "/turns/" + tid, token: s.dev}, http.StatusOK, ""))
	if now.Status == "awaiting_approval" || now.Approval != nil {
		t.Errorf("GET right after the yes reply = %+v, want running (or ended) without the approval", now)
	}
	if v := s.waitFinal(t, s.dev, cid, tid); v.Status != "succeeded" {
		t.Errorf("after yes the turn = %+v, want succeeded", v)
	}
	out = s.expect(t, req{method: "GET", path: "/v1/conversations/" + cid, token: s.dev}, http.StatusOK, "")
	if n := len(decodeInto[struct {
		Turns []turnView `json:"turns"`
	}](t, out).Turns); n != 2 {
		t.Errorf("conversation has %d turns after the yes reply, want 2", n)
	}
}

// testSupersede: free text while a form waits supersedes the waiting turn;
// answering it afterwards is 409 (docs/api/openapi.yaml).
func testSupersede(t *testing.T, s *stack) {
	cid := s.newConversation(t, s.dev)
	old := s.send(t, s.dev, cid, "Design a valve flange with 4 holes")
	v := s.wait(t, s.dev, cid, old)
	if v.Status != "awaiting_input" || v.Form == nil {
		t.Fatalf("flange turn = %+v, want awaiting_input", v)
	}
	callID := v.Form.Calls[0].CallID
	next := s.send(t, s.dev, cid, "Create a PNG image with the word Popelnase")
	if next == old {
		t.Fatalf("free text reused the waiting turn %s", old)
	}
	if v := s.wait(t, s.dev, cid, next); v.Status != "succeeded" {
		t.Errorf("new turn = %+v, want succeeded", v)
	}
	v = s.waitFinal(t, s.dev, cid, old)
	if v.Status != "superseded" || v.Form != nil {
		t.Errorf("old turn = %+v, want superseded without a form", v)
	}
	answer := jsonBody(map[string]any{"answers": map[string]any{callID: map[string]any{"material": "steel"}}})
	s.expect(t, req{method: "POST", path: "/v1/conversations/" + cid + "/turns/" + old + "/input", token: s.dev, body: answer}, http.StatusConflict, "not_waiting")
}

func testCatalog(t *testing.T, s *stack) {
	out := s.expect(t, req{method: "GET", path: "/v1/catalog", token: s.dev}, http.StatusOK, "")
	cat := decodeInto[struct {
		Skills []struct {
			Name             string         `json:"name"`
			RequiresApproval bool           `json:"requires_approval"`
			InputSchema      map[string]any `json:"input_schema"`
		} `json:"skills"`
		Workflows []struct {
			ID     string `json:"id"`
			Inputs []any  `json:"inputs"`
		} `json:"workflows"`
	}](t, out)
	approval := map[string]bool{}
	for _, sk := range cat.Skills {
		approval[sk.Name] = sk.RequiresApproval
		if sk.InputSchema["type"] != "object" {
			t.Errorf("skill %s input_schema = %v, want an object schema", sk.Name, sk.InputSchema)
		}
	}
	want := map[string]bool{"create_svg_artifact": false, "convert_svg_to_png": false, "design_valve_flange": false, "publish_artifact": true}
	for name, req := range want {
		got, ok := approval[name]
		if !ok {
			t.Errorf("catalog skills %v lack %s", approval, name)
		} else if got != req {
			t.Errorf("skill %s requires_approval = %v, want %v", name, got, req)
		}
	}
	var ids []string
	for _, w := range cat.Workflows {
		ids = append(ids, w.ID)
		if len(w.Inputs) == 0 {
			t.Errorf("workflow %s lists no inputs", w.ID)
		}
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"flange_drawing", "publish_word", "word_to_png"}, ids); diff != "" {
		t.Errorf("catalog workflows (-want +got):\n%s", diff)
	}
}
