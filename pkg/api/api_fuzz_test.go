package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/localstore"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/turn"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// fuzzExecutions is a Step Functions client whose calls all succeed: every
// execution runs, every task token is open.
type fuzzExecutions struct{}

var _ api.Executions = fuzzExecutions{}

func (fuzzExecutions) StartExecution(context.Context, *sfn.StartExecutionInput, ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	return &sfn.StartExecutionOutput{}, nil
}

func (fuzzExecutions) DescribeExecution(context.Context, *sfn.DescribeExecutionInput, ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return &sfn.DescribeExecutionOutput{Status: "RUNNING"}, nil
}

func (fuzzExecutions) StopExecution(context.Context, *sfn.StopExecutionInput, ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	return &sfn.StopExecutionOutput{}, nil
}

func (fuzzExecutions) SendTaskSuccess(context.Context, *sfn.SendTaskSuccessInput, ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error) {
	return &sfn.SendTaskSuccessOutput{}, nil
}

type fuzzCatalogs struct{ c *catalog.Catalog }

func (s fuzzCatalogs) Catalog(context.Context) (*catalog.Catalog, error) { return s.c, nil }

// Routes with a body, as the fuzz target's route byte picks them.
const (
	routeCreate = iota
	routeMessage
	routeInputForm     // …/turns/t_form/input: a form waits
	routeInputApproval // …/turns/t_appr/input: an approval waits
	routeInputEnded    // …/turns/t_done/input: nothing waits
	routeUpload
	routeCount
)

// fuzzServer is an api.Server on the real Valkey store (embedded) with the
// demo catalog; each fuzz input gets its own conversation from fixture.
type fuzzServer struct {
	h        http.Handler
	store    record.Store
	token    string
	cat      *catalog.Catalog
	router   routers.Router
	approval string // the approval id of t_appr's calls
	seq      atomic.Int64
}

const fuzzBase = "http://api.fuzz"

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	_, rdb := valkeytest.Embedded(f)
	store := valkey.New(rdb, valkey.Options{})
	arts, err := localstore.New(f.TempDir(), fuzzBase, []byte("fuzz key"))
	if err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "catalog", "testdata", "capabilities.json"))
	if err != nil {
		f.Fatal(err)
	}
	var caps []catalog.Capability
	if err := json.Unmarshal(b, &caps); err != nil {
		f.Fatal(err)
	}
	wfs, err := catalog.LoadWorkflows(os.DirFS(filepath.Join("..", "..", "testdata", "workflows")), ".")
	if err != nil {
		f.Fatal(err)
	}
	cat := catalog.New(caps, wfs)
	local := &auth.Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	tok, err := local.Mint("dev")
	if err != nil {
		f.Fatal(err)
	}
	s := &api.Server{Store: store, Artifacts: arts, Executions: fuzzExecutions{}, Auth: local, Catalogs: fuzzCatalogs{cat},
		MaxUpload: 64 << 10, MaxText: 16000, StateMachineARN: "arn:aws:states:us-east-1:1:stateMachine:t",
		Limits: turn.Limits{AwaitTimeout: time.Hour, MaxConcurrency: 4}}

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		f.Fatalf("load %s: %v", specPath, err)
	}
	doc.Servers = openapi3.Servers{{URL: fuzzBase}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		f.Fatalf("router: %v", err)
	}
	fs := &fuzzServer{h: s.Handler(), store: store, token: tok, cat: cat, router: router}
	fs.approval = batch.ApprovalID(fs.pending("c_probe", "t_appr", "publish_artifact", `{"artifact_id":"a1","channel":"web"}`))
	return fs
}

// pending validates one call of turn tid as the model's.
func (fs *fuzzServer) pending(cid, tid, tool, args string) []record.PendingCall {
	conv := &record.Conversation{Meta: record.Meta{ID: cid, Owner: "dev"},
		Artifacts: []artifact.Artifact{{ID: "a1", Name: "a.svg", MimeType: "image/svg+xml"}}}
	t := &record.Turn{ID: tid}
	return batch.Validate(fs.cat, []llm.ToolCall{{ID: turn.CallID(tid, 1), Name: tool, Arguments: args}}, turn.Env(conv, t))
}

// fixture stores a new conversation of dev with the upload a1, an ended
// turn t_done, a turn t_form waiting for a form (design_valve_flange's
// material) and a turn t_appr waiting for the approval of publish_artifact.
func (fs *fuzzServer) fixture(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	cid := fmt.Sprintf("c_fz%d", fs.seq.Add(1))
	now := time.Now().UTC()
	if err := fs.store.Create(ctx, record.Meta{ID: cid, Owner: "dev", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := fs.store.PutArtifacts(ctx, cid, artifact.Artifact{ID: "a1", Name: "a.svg", MimeType: "image/svg+xml", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	msg := func(s string) []llm.Message { return []llm.Message{{Role: llm.RoleUser, Content: s}} }
	turns := []*record.Turn{
		{ID: "t_done", StartedAt: now.Add(-3 * time.Second), UpdatedAt: now, Status: record.StatusSucceeded, Text: "hi", Messages: msg("hi"), FinalReport: "hello"},
		{ID: "t_form", StartedAt: now.Add(-2 * time.Second), UpdatedAt: now, Status: record.StatusAwaitingInput, Text: "flange", Messages: msg("flange"),
			TaskToken: "tok_form_" + cid, Pending: fs.pending(cid, "t_form", "design_valve_flange", `{"holes":4,"outer_diameter_mm":100}`)},
		{ID: "t_appr", StartedAt: now.Add(-time.Second), UpdatedAt: now, Status: record.StatusAwaitingApproval, Text: "publish", Messages: msg("publish"),
			TaskToken: "tok_appr_" + cid, Pending: fs.pending(cid, "t_appr", "publish_artifact", `{"artifact_id":"a1","channel":"web"}`)},
	}
	for _, tr := range turns {
		if err := fs.store.SaveTurn(ctx, cid, tr); err != nil {
			t.Fatal(err)
		}
	}
	if got := turns[1].Pending[0].State; got != record.CallNeedsInput {
		t.Fatalf("t_form's call is %s, want needs_input", got)
	}
	if got := turns[2].Pending[0].State; got != record.CallNeedsApproval {
		t.Fatalf("t_appr's call is %s, want needs_approval", got)
	}
	return cid
}

type fuzzResp struct {
	status int
	header http.Header
	body   []byte
}

// serve runs one request through the handler in process.
func (fs *fuzzServer) serve(t *testing.T, method, target, ctype string, body []byte) fuzzResp {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, fuzzBase+target, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+fs.token)
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	w := httptest.NewRecorder()
	fs.h.ServeHTTP(w, r)
	return fuzzResp{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

// checkSpec checks a request the server accepted (2xx) and the answer out
// against openapi.yaml. Only the fuzzed request is checked, not the reads
// after it: kin-openapi compiles the schemas on every call, which costs
// more than the request itself.
func (fs *fuzzServer) checkSpec(t *testing.T, method, target, ctype string, body []byte, out fuzzResp) {
	t.Helper()
	if m := map[string]json.RawMessage{}; strings.HasSuffix(target, "/messages") && json.Unmarshal(body, &m) == nil {
		// The server counts the text's characters without the white space
		// around it (a known leniency against openapi.yaml's maxLength):
		// check the rest of the request with the text it counts.
		var text string
		if json.Unmarshal(m["text"], &text) == nil && m["text"] != nil {
			m["text"], _ = json.Marshal(strings.TrimSpace(text))
			body, _ = json.Marshal(m)
		}
	}
	if ctype == "application/json" && len(bytes.TrimSpace(body)) == 0 {
		// White space only reads as no body (POST /v1/conversations takes
		// none); the validator would read it as broken JSON.
		body, ctype = nil, ""
	}
	vr := httptest.NewRequest(method, fuzzBase+target, bytes.NewReader(body))
	if ctype != "" {
		vr.Header.Set("Content-Type", ctype)
	}
	route, params, err := fs.router.FindRoute(vr)
	if err != nil {
		t.Fatalf("%s %s: no route in openapi.yaml: %v", method, target, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if out.status/100 == 2 && ctype == "application/json" {
		if err := openapi3filter.ValidateRequest(t.Context(), in); err != nil {
			t.Errorf("%s %s: the server accepted (%d) a request openapi.yaml forbids: %v", method, target, out.status, err)
		}
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: out.status, Header: out.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	rin.SetBodyBytes(out.body)
	if err := openapi3filter.ValidateResponse(t.Context(), rin); err != nil {
		t.Errorf("%s %s: the response does not match openapi.yaml: %v\nresponse: %d %s", method, target, err, out.status, trim(string(out.body)))
	}
}

// FuzzRequestBodies sends arbitrary bodies to every route that takes one
// (POST /v1/conversations, …/messages, …/turns/{tid}/input for a turn
// waiting for a form, one waiting for an approval and an ended one, and
// …/artifacts?name=… with the upload's name and content type fuzzed too)
// through the real api.Server on the real Valkey store (issue 20). The
// answer is a 2xx or a 4xx, never a 5xx or a panic, and matches
// openapi.yaml, and a request it accepts is one openapi.yaml allows (so
// no unknown field gets in, not even as "Text" for "text"); a 4xx is the
// JSON error shape with a code and a message;
// a 2xx says what it did (a created conversation or artifact, a started
// or answered turn); and afterwards the conversation still loads (GET
// /v1/conversations/{cid} is 200) with every turn readable.
func FuzzRequestBodies(f *testing.F) {
	capMinimize(5 * time.Second)
	fs := newFuzzServer(f)
	seeds := []struct {
		route       uint8
		name, ctype string
		body        string
	}{
		{routeCreate, "", "", ``},
		{routeCreate, "", "", `{"title":"Flanges"}`},
		{routeCreate, "", "", `{"title":"a"} xx`},
		{routeCreate, "", "", `{"title":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`},
		{routeMessage, "", "", `{"text":"Create an SVG with the word Hello"}`},
		{routeMessage, "", "", `{"text":"yes"}`},
		{routeMessage, "", "", `{"text":"no thanks"}`},
		{routeMessage, "", "", `{"text":"look at this","files":["a1"]}`},
		{routeMessage, "", "", `{"text":"x","files":["a_nope"]}`},
		{routeMessage, "", "", `{"text":"/workflow publish_word"}`},
		{routeMessage, "", "", `{"text":"/workflow publish_word hello on the web"}`},
		{routeMessage, "", "", `{"text":"","workflow":{"id":"publish_word","inputs":{"word":"Hi","channel":"web"}}}`},
		{routeMessage, "", "", `{"text":"","workflow":{"id":"publish_word","inputs":{"word":7}}}`},
		{routeMessage, "", "", `{"text":"","workflow":{"id":"flange_drawing","inputs":{}}}`},
		{routeMessage, "", "", `{"text":"/workflow","workflow":{"id":"x"}}`},
		{routeMessage, "", "", `{"workflow":{"id":" "}}`},
		{routeMessage, "", "", `{"text":"` + strings.Repeat("é", 16001) + `"}`},
		{routeInputForm, "", "", `{"answers":{"call_t_form_1":{"material":"steel"}}}`},
		{routeInputForm, "", "", `{"answers":{"call_t_form_1":{"material":"cheese"}}}`},
		{routeInputForm, "", "", `{"answers":{"call_t_form_1":{"material":"steel","holes":"x"}},"files":["a1"]}`},
		{routeInputForm, "", "", `{"answers":{"c_nope":{"material":"steel"}}}`},
		{routeInputForm, "", "", `{"answers":{"call_t_form_1":null}}`},
		{routeInputApproval, "", "", `{"approval":{"id":"` + fs.approval + `","decision":"approve","note":"ok"}}`},
		{routeInputApproval, "", "", `{"approval":{"id":"` + fs.approval + `","decision":"reject"}}`},
		{routeInputApproval, "", "", `{"approval":{"id":"` + fs.approval + `","decision":"approve","arguments":{"call_t_appr_1":{"artifact_id":"a1","channel":"print"}}}}`},
		{routeInputApproval, "", "", `{"approval":{"id":"` + fs.approval + `","decision":"approve","arguments":{"call_t_appr_1":{"artifact_id":7}}}}`},
		{routeInputApproval, "", "", `{"approval":{"id":"` + fs.approval + `","decision":"approve","arguments":{"call_t_appr_1":null}}}`},
		{routeInputApproval, "", "", `{"approval":{"id":"ap_stale","decision":"approve"}}`},
		{routeInputApproval, "", "", `{"approval":{"decision":"maybe"}}`},
		{routeInputEnded, "", "", `{"approval":{"id":"ap_1","decision":"approve"}}`},
		{routeInputEnded, "", "", `{}`},
		{routeUpload, "report 2024.pdf", "application/pdf", "%PDF-1.7"},
		{routeUpload, "a.txt", "", "hello"},
		{routeUpload, "..", "text/plain", "x"},
		{routeUpload, "invoice\u202Etxt.exe", "text/plain", "x"},
		{routeUpload, strings.Repeat("é", 200), "text/plain; charset=utf-8", "x"},
		{routeUpload, "big.bin", "application/octet-stream", strings.Repeat("x", 64<<10+1)},
		// Issue 24, point 7: input hygiene.
		{routeCreate, "", "", `{"title":"a\u0000b"}`},
		{routeCreate, "", "", `{"title":"\u001b[31mred\u0007"}`},
		{routeCreate, "", "", `{"title":"invoice\u202Etxt.exe"}`},
		{routeCreate, "", "", `{"title":"a\u0085b"}`},
		{routeCreate, "", "", `{"title":"\ud800"}`},
		{routeCreate, "", "", `{"title":"\ud83d\ude00"}`},
		{routeCreate, "", "", "{\"title\":\"caf\xe9\"}"},
		{routeCreate, "", "", `{"title":null}`},
		{routeCreate, "", "", `{"title":"a","title":"b"}`},
		{routeMessage, "", "", `{"text":"ding\u0007 \u001b"}`},
		{routeMessage, "", "", `{"text":"x\udc00y"}`},
		{routeMessage, "", "", `{"text":"\ud800\u0041"}`},
		{routeMessage, "", "", `{"text":"a\u2067b"}`},
		{routeMessage, "", "", `{"text":5}`},
		{routeMessage, "", "", `{"text":"hi","text":"yes"}`},
		{routeMessage, "", "", `{"text":"hi","files":null}`},
		{routeInputApproval, "", "", `{"answers":{},"approval":{"id":"` + fs.approval + `","decision":"approve"}}`},
		{routeInputApproval, "", "", `{"answers":{"call_t_appr_1":{"x":1}},"approval":{"id":"` + fs.approval + `","decision":"approve"}}`},
		{routeInputApproval, "", "", `{"approval":{"id":"` + fs.approval + `","decision":"approve","note":"ok\u202E"}}`},
		{routeInputApproval, "", "", `{"approval":null}`},
		{routeInputForm, "", "", `{"answers":{"call_t_form_1":{"material":"steel"}},"answers":{}}`},
		{routeUpload, "a.txt", "../../etc/passwd", "x"},
		{routeUpload, "a.txt", "TEXT/Plain;Charset=UTF-8", "x"},
		{routeUpload, "a.txt", "text/plain;;", "x"},
		{routeUpload, "a.txt", "*/*", "x"},
	}
	for _, s := range seeds {
		f.Add(s.route, s.name, s.ctype, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, name, ctype string, body []byte) {
		cid := fs.fixture(t)
		defer fs.store.Delete(context.WithoutCancel(t.Context()), cid)
		c := "/v1/conversations/" + cid
		var target, bodyType string
		switch route % routeCount {
		case routeCreate:
			target = "/v1/conversations"
		case routeMessage:
			target = c + "/messages"
		case routeInputForm:
			target = c + "/turns/t_form/input"
		case routeInputApproval:
			target = c + "/turns/t_appr/input"
		case routeInputEnded:
			target = c + "/turns/t_done/input"
		case routeUpload:
			target, bodyType = c+"/artifacts?name="+url.QueryEscape(name), ctype
		}
		if bodyType == "" && route%routeCount != routeUpload && len(body) > 0 {
			bodyType = "application/json"
		}
		out := fs.serve(t, http.MethodPost, target, bodyType, body)
		fs.checkSpec(t, http.MethodPost, target, bodyType, body, out)
		desc := fmt.Sprintf("POST %s %q = %d %s", target, trim(string(body)), out.status, trim(string(out.body)))
		if testing.Verbose() {
			t.Log(desc)
		}

		switch out.status / 100 {
		case 2:
		case 4:
			var e struct {
				Error *struct {
					Code    *string `json:"code"`
					Message *string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(out.body, &e); err != nil || e.Error == nil || e.Error.Code == nil || *e.Error.Code == "" || e.Error.Message == nil || *e.Error.Message == "" {
				t.Fatalf("%s: a 4xx without the error shape {\"error\":{\"code\",\"message\"}} (%v)", desc, err)
			}
			if ct := out.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s: Content-Type %q, want application/json", desc, ct)
			}
		default:
			t.Fatalf("%s: want a 2xx or a 4xx", desc)
		}

		if out.status/100 == 2 && route%routeCount != routeUpload {
			if problem := oddJSON(body); problem != "" {
				t.Errorf("%s: accepted a body that %s", desc, problem)
			}
		}
		if out.status/100 == 2 {
			switch route % routeCount {
			case routeCreate:
				var v struct {
					ID string `json:"conversation_id"`
				}
				if err := json.Unmarshal(out.body, &v); err != nil || v.ID == "" || out.status != http.StatusCreated {
					t.Fatalf("%s: want 201 {conversation_id}", desc)
				}
				defer fs.store.Delete(context.WithoutCancel(t.Context()), v.ID)
				if got := fs.serve(t, http.MethodGet, "/v1/conversations/"+v.ID, "", nil); got.status != http.StatusOK {
					t.Fatalf("%s: then GET the new conversation = %d %s, want 200", desc, got.status, trim(string(got.body)))
				}
			case routeMessage, routeInputForm, routeInputApproval, routeInputEnded:
				var v struct {
					TurnID string `json:"turn_id"`
					Status string `json:"status"`
				}
				if err := json.Unmarshal(out.body, &v); err != nil || v.TurnID == "" || v.Status != "running" || out.status != http.StatusAccepted {
					t.Fatalf("%s: want 202 {turn_id, status: running}", desc)
				}
				if got := fs.serve(t, http.MethodGet, c+"/turns/"+url.PathEscape(v.TurnID), "", nil); got.status != http.StatusOK {
					t.Fatalf("%s: then GET turn %s = %d %s, want 200", desc, v.TurnID, got.status, trim(string(got.body)))
				}
			case routeUpload:
				var v struct {
					ID       string `json:"artifact_id"`
					Name     string `json:"name"`
					MimeType string `json:"mime_type"`
				}
				if err := json.Unmarshal(out.body, &v); err != nil || v.ID == "" || out.status != http.StatusCreated {
					t.Fatalf("%s: want 201 {artifact_id, name, mime_type}", desc)
				}
				if want := strings.TrimSpace(name); v.Name != want {
					t.Errorf("%s: stored name %q, want %q", desc, v.Name, want)
				}
				if !plainMediaType(v.MimeType) {
					t.Errorf("%s: stored the media type %q, which is not type/subtype", desc, v.MimeType)
				}
				if !plainFileName(v.Name) {
					t.Errorf("%s: accepted the name %q, which is not a plain file name", desc, v.Name)
				}
				if len(body) > 64<<10 {
					t.Errorf("%s: accepted %d bytes over the 64 KiB limit", desc, len(body))
				}
			}
		}

		// The conversation still loads, whole, and so does each of its turns.
		got := fs.serve(t, http.MethodGet, c, "", nil)
		if got.status != http.StatusOK {
			t.Fatalf("%s: then GET %s = %d %s, want 200", desc, c, got.status, trim(string(got.body)))
		}
		var conv struct {
			Turns []struct {
				TurnID string `json:"turn_id"`
			} `json:"turns"`
		}
		if err := json.Unmarshal(got.body, &conv); err != nil {
			t.Fatalf("%s: then GET %s: %v", desc, c, err)
		}
		for _, tr := range conv.Turns {
			if got := fs.serve(t, http.MethodGet, c+"/turns/"+url.PathEscape(tr.TurnID), "", nil); got.status != http.StatusOK {
				t.Fatalf("%s: then GET turn %s = %d %s, want 200", desc, tr.TurnID, got.status, trim(string(got.body)))
			}
		}
	})
}

// capMinimize bounds how long the fuzzer minimizes a new interesting (or
// failing) input to d, unless -fuzzminimizetime is given. Its default, 60s,
// is longer than a short -fuzztime: with inputs that cost milliseconds
// each (a Valkey fixture, the request, the reads after it), minimizing one
// would take the whole run (the fuzzer reports 0 execs/s meanwhile).
func capMinimize(d time.Duration) {
	set := false
	flag.Visit(func(fl *flag.Flag) { set = set || fl.Name == "test.fuzzminimizetime" })
	if !set {
		_ = flag.Set("test.fuzzminimizetime", d.String())
	}
}

// plainFileName is the rule of docs/api/openapi.yaml for upload names, written
// independently of the server's check.
func plainFileName(s string) bool {
	if s == "" || s == "." || s == ".." || !utf8.ValidString(s) || utf8.RuneCountInString(s) > 200 {
		return false
	}
	for _, c := range s {
		if c == '/' || c == '\\' || c == '"' || unicode.IsControl(c) || unicode.Is(unicode.Cf, c) {
			return false
		}
	}
	return true
}

// oddJSON says what is wrong with an accepted JSON body under the rules of
// openapi.yaml ("Bodies", "Text"), written independently of the server:
// not UTF-8, a \u escape of a lone surrogate, a null outside free-form
// values, or a title, text or note with a control character other than
// tab, LF and CR, or a bidi embedding, override or isolate. "" when none.
func oddJSON(body []byte) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return ""
	}
	if !utf8.Valid(body) {
		return "is not UTF-8"
	}
	escape := func(at int) (rune, bool) { // the rune of a \uXXXX at body[at:]
		if at+6 > len(body) || body[at] != '\\' || body[at+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[at+2:at+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		switch {
		case !ok:
			i++ // \\, \" …: the next byte is escaped
		case r >= 0xDC00 && r <= 0xDFFF:
			return "holds a lone low surrogate escape"
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := escape(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return "holds a lone high surrogate escape"
			}
			i += 11
		default:
			i += 5
		}
	}
	var tree any
	if json.Unmarshal(body, &tree) != nil {
		return ""
	}
	var walk func(v any, key string) string
	walk = func(v any, key string) string {
		switch x := v.(type) {
		case nil:
			return "holds null for " + key
		case map[string]any:
			if key == "answers" || key == "arguments" || key == "inputs" {
				return "" // free-form values
			}
			for k, e := range x {
				if p := walk(e, k); p != "" {
					return p
				}
			}
		case []any:
			for _, e := range x {
				if p := walk(e, key); p != "" {
					return p
				}
			}
		case string:
			if key == "title" || key == "text" || key == "note" {
				for _, c := range x {
					if unicode.IsControl(c) && c != '\t' && c != '\n' && c != '\r' || c >= 0x202A && c <= 0x202E || c >= 0x2066 && c <= 0x2069 {
						return fmt.Sprintf("holds %U in %s", c, key)
					}
				}
			}
		}
		return ""
	}
	return walk(tree, "the body")
}

// plainMediaType: a stored upload type is type/subtype with lower-case,
// non-wildcard names.
func plainMediaType(s string) bool {
	mt, _, _ := strings.Cut(s, ";")
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && typ != "" && sub != "" && !strings.ContainsAny(mt, "* ") && mt == strings.ToLower(mt)
}
