package functions_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

const (
	artifactBucket  = "clientagent-test-artifacts"
	auditBucket     = "clientagent-test-audit"
	stateMachineARN = "arn:aws:states:us-east-1:123456789012:stateMachine:clientagent-test-turn"
	// awaitToken is the task token in testdata/events/stepfunctions-await.json.
	awaitToken = "AQCEAAAAKgAAAAMAAAAAAAAAAf+functions+test+token"
)

// stepFunctions are the functions the turn state machine invokes.
var stepFunctions = []string{"llmstep", "validate", "invoke", "append", "await"}

// valkeyURL is a real server's (VALKEY_URL, as CI sets it) or an embedded
// one's, reached by the functions over TCP.
func valkeyURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(valkeytest.EnvURL); u != "" {
		return u
	}
	mr, _ := valkeytest.Embedded(tb)
	return "redis://" + mr.Addr() + "/0"
}

// demoAgents serves the demo specialists (real A2A over loopback) and
// returns their base URLs; they may fetch input files from fileOrigins.
func demoAgents(tb testing.TB, fileOrigins ...string) []string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	srv := &httptest.Server{Listener: ln, Config: &http.Server{
		Handler: demoagents.Handler(base, demoagents.Options{FetchOrigins: append([]string{base}, fileOrigins...)})}}
	srv.Start()
	tb.Cleanup(srv.Close)
	return demoagents.AgentURLs(base)
}

// stepEnv is the environment infra/ gives the platform functions, pointed
// at the test's Valkey, fake AWS and agents.
func stepEnv(valkey string, aws *fakeAWS, agents []string) map[string]string {
	env := map[string]string{
		"CLIENTAGENT_ENV":                     "test",
		"VALKEY_URL":                          valkey,
		"ARTIFACT_BUCKET":                     artifactBucket,
		"AUDIT_BUCKET":                        auditBucket,
		"CLIENTAGENT_LLM":                     "scripted",
		"CLIENTAGENT_AGENTS":                  strings.Join(agents, ","),
		"CLIENTAGENT_ALLOW_PRIVATE_FILE_URLS": "1", // the specialists are on loopback
		"STATE_MACHINE_ARN":                   stateMachineARN,
	}
	if aws != nil {
		for k, v := range aws.env() {
			env[k] = v
		}
	}
	return env
}

// startAll starts the named functions with env and waits for their cold
// starts.
func startAll(tb testing.TB, env map[string]string, names ...string) map[string]*function {
	tb.Helper()
	fns := map[string]*function{}
	for _, n := range names {
		fns[n] = startFunction(tb, n, env)
	}
	for _, n := range names {
		fns[n].awaitReady()
	}
	return fns
}

// httpResponse is an API Gateway HTTP API (and Function URL) response.
type httpResponse struct {
	StatusCode      int               `json:"statusCode"`
	Headers         map[string]string `json:"headers"`
	Body            string            `json:"body"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
}

// request sends an HTTP event and decodes the response body into out
// (when not nil), failing unless the status is want.
func request(tb testing.TB, f *function, ev []byte, want int, out any) {
	tb.Helper()
	var resp httpResponse
	f.respond(ev, &resp)
	if resp.StatusCode != want {
		tb.Fatalf("%s: status %d, want %d; body %s", f.name, resp.StatusCode, want, resp.Body)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
			tb.Fatalf("%s: body %q: %v", f.name, resp.Body, err)
		}
	}
}

// execution drives one turn's execution through the step functions as
// statemachine/turn.asl.json does (LLMStep → ValidateBatch → InvokeCalls →
// AppendResults → LLMStep …, AwaitUser on a pause), with the payloads its
// states send.
type execution struct {
	tb       testing.TB
	fns      map[string]*function
	cid, tid string
}

func (x *execution) step(fn, ev string, vars map[string]string, out any) {
	x.tb.Helper()
	all := map[string]string{"CID": x.cid, "TID": x.tid}
	for k, v := range vars {
		all[k] = v
	}
	x.fns[fn].respond(event(x.tb, ev, all), out)
}

// run goes from LLMStep to the end ("done", "failed", "end") or a pause
// ("await").
func (x *execution) run() string {
	x.tb.Helper()
	for range 20 {
		var s struct{ Next string }
		x.step("llmstep", "stepfunctions-llmstep.json", nil, &s)
		if s.Next != "tools" {
			return s.Next
		}
		if end := x.validate("null"); end != "" {
			return end
		}
	}
	x.tb.Fatal("the turn did not end within 20 LLM steps")
	return ""
}

// resume goes on from AwaitUser with the task's output (the user's reply).
func (x *execution) resume(output string) string {
	x.tb.Helper()
	if end := x.validate(output); end != "" {
		return end
	}
	return x.run()
}

// validate runs ValidateBatch with reply and what follows it up to the next
// LLMStep (""), a pause ("await") or the end.
func (x *execution) validate(reply string) string {
	x.tb.Helper()
	var v struct {
		Next  string
		Calls []string
	}
	x.step("validate", "stepfunctions-validate.json", map[string]string{"REPLY": reply}, &v)
	switch v.Next {
	case "invoke":
		for _, c := range v.Calls {
			var o struct {
				CallID string `json:"call_id"`
				Status string
			}
			x.step("invoke", "stepfunctions-invoke.json", map[string]string{"CALL": c}, &o)
			if o.CallID != c || o.Status != "succeeded" {
				x.tb.Fatalf("invoke %s = %+v, want call_id %s succeeded", c, o, c)
			}
		}
	case "append":
	case "await":
		return x.await()
	default:
		return v.Next
	}
	var a struct{ Next string }
	x.step("append", "stepfunctions-append.json", nil, &a)
	if a.Next == "await" {
		return x.await()
	}
	return ""
}

func (x *execution) await() string {
	x.tb.Helper()
	var w struct{ Status string }
	x.step("await", "stepfunctions-await.json", nil, &w)
	if !strings.HasPrefix(w.Status, "awaiting_") {
		x.tb.Fatalf("await = %+v, want an awaiting status", w)
	}
	return "await"
}

// turnView is the part of GET …/turns/{tid} the test reads.
type turnView struct {
	Status   string `json:"status"`
	Reply    string `json:"reply"`
	LLMCalls int    `json:"llm_calls"`
	Approval *struct {
		ID string `json:"id"`
	} `json:"approval"`
	Artifacts []json.RawMessage `json:"artifacts"`
}

// Issue 14: a turn runs through the functions as built for Lambda, each its
// own process under a Lambda Runtime API, fed what API Gateway, Step
// Functions and EventBridge send: the HTTP API starts the execution
// (StartExecution), the steps make the Popelnase PNG with the demo
// specialists over A2A (artifacts and audit events into S3), an approval
// pauses (the task token stored, answered through the API with
// SendTaskSuccess) and resumes; an EventBridge status change and FailTurn
// end turns.
func TestTurnThroughFunctions(t *testing.T) {
	t.Parallel()
	aws := newFakeAWS(t)
	env := stepEnv(valkeyURL(t), aws, demoAgents(t, aws.srv.URL))
	fns := startAll(t, env, append([]string{"api"}, stepFunctions...)...)
	t.Logf("functions built in %v", build.took)
	user := valkeytest.ID(t, "user")
	api := func(ev string, vars map[string]string, want int, out any) {
		t.Helper()
		all := map[string]string{"USER": user}
		for k, v := range vars {
			all[k] = v
		}
		request(t, fns["api"], event(t, ev, all), want, out)
	}
	var conv struct {
		ID string `json:"conversation_id"`
	}
	api("apigw-v2-create-conversation.json", nil, http.StatusCreated, &conv)
	post := func(text string) *execution {
		t.Helper()
		var started struct {
			TurnID string `json:"turn_id"`
		}
		api("apigw-v2-post-message.json", map[string]string{"CID": conv.ID, "TEXT": text}, http.StatusAccepted, &started)
		ex := aws.lastExecution(t)
		var input map[string]any
		if err := json.Unmarshal([]byte(ex.Input), &input); err != nil {
			t.Fatalf("StartExecution input %q: %v", ex.Input, err)
		}
		if ex.Name != started.TurnID || ex.StateMachineArn != stateMachineARN || input["conversation_id"] != conv.ID || input["turn_id"] != started.TurnID {
			t.Fatalf("StartExecution(%+v) for turn %s of %s", ex, started.TurnID, conv.ID)
		}
		return &execution{tb: t, fns: fns, cid: conv.ID, tid: started.TurnID}
	}
	view := func(x *execution) turnView {
		t.Helper()
		var v turnView
		api("apigw-v2-get-turn.json", map[string]string{"CID": x.cid, "TID": x.tid}, http.StatusOK, &v)
		return v
	}

	// The reference turn: create the SVG, convert it to PNG, answer.
	png := post("Create a PNG image with the word Popelnase")
	if end := png.run(); end != "done" {
		t.Fatalf("Popelnase turn ended with %q, want done", end)
	}
	if v := view(png); v.Status != "succeeded" || v.LLMCalls != 3 || len(v.Artifacts) != 2 {
		t.Errorf("Popelnase turn = %+v, want succeeded after 3 LLM calls with 2 artifacts", v)
	}
	arts := aws.keys(artifactBucket, conv.ID+"/")
	sort.Strings(arts)
	var pngs int
	for _, k := range arts {
		if o, _ := aws.object(k); bytes.HasPrefix(o.body, []byte("\x89PNG")) {
			pngs++
		}
	}
	if len(arts) != 2 || pngs != 1 {
		t.Errorf("artifacts in S3 = %v with %d PNG, want the SVG and the PNG", arts, pngs)
	}
	if n := len(aws.keys(auditBucket, "")); n < 2 {
		t.Errorf("audit objects in S3 = %d, want one per executed call (2)", n)
	}

	// An approval: the pause stores the token, the API answers it.
	pub := post("Publish it to web")
	if end := pub.run(); end != "await" {
		t.Fatalf("publish turn = %q, want a pause for approval", end)
	}
	v := view(pub)
	if v.Status != "awaiting_approval" || v.Approval == nil || v.Approval.ID == "" {
		t.Fatalf("publish turn = %+v, want awaiting_approval with an approval id", v)
	}
	audited := len(aws.keys(auditBucket, ""))
	api("apigw-v2-post-input.json", map[string]string{"CID": pub.cid, "TID": pub.tid, "APPROVAL": v.Approval.ID}, http.StatusAccepted, nil)
	answer := aws.lastAnswer(t)
	if answer.TaskToken != awaitToken || !strings.Contains(answer.Output, `"approve"`) {
		t.Fatalf("SendTaskSuccess(%+v), want the stored token and the approval", answer)
	}
	if end := pub.resume(answer.Output); end != "done" {
		t.Fatalf("publish turn after approval = %q, want done", end)
	}
	if v := view(pub); v.Status != "succeeded" {
		t.Errorf("publish turn = %+v, want succeeded", v)
	}
	if n := len(aws.keys(auditBucket, "")); n < audited+2 {
		t.Errorf("audit objects after the approval = %d, want the approval and the executed call beside %d", n, audited)
	}

	// An execution stopped without a step recording it: EventBridge tells
	// llmstep, which ends the turn.
	stopped := post("Create a PNG image with the word Stop")
	var ack json.RawMessage
	stopped.step("llmstep", "eventbridge-execution-aborted.json", nil, &ack)
	if string(ack) != "{}" {
		t.Errorf("llmstep(status change) = %s, want {}", ack)
	}
	if v := view(stopped); v.Status != "failed" {
		t.Errorf("turn after ABORTED = %+v, want failed", v)
	}

	// FailTurn: the state machine's catch hands llmstep the error.
	failed := post("Create a PNG image with the word Fail")
	var s struct{ Next string }
	failed.step("llmstep", "stepfunctions-failturn.json", nil, &s)
	if s.Next != "failed" {
		t.Errorf("llmstep(fail) = %+v, want next failed", s)
	}
	if v := view(failed); v.Status != "failed" {
		t.Errorf("turn after FailTurn = %+v, want failed", v)
	}

	// The API's own edge: no JWT claims, no access.
	request(t, fns["api"], event(t, "apigw-v2-no-authorizer.json", nil), http.StatusUnauthorized, nil)
}

// Issue 14: the state machine retries by errorType, which aws-lambda-go
// takes from the Go type of the error a handler returns. Each step
// function, as built for Lambda, answers a store it cannot reach with
// TransientError (retried), a payload it cannot read with InputError and
// an unknown conversation with NotFoundError (neither retried).
func TestErrorTypes(t *testing.T) {
	t.Parallel()
	good, down := valkeyURL(t), "redis://"+closedPort(t)+"/0"
	aws := newFakeAWS(t)
	events := map[string]string{
		"llmstep":  "stepfunctions-llmstep.json",
		"validate": "stepfunctions-validate.json",
		"invoke":   "stepfunctions-invoke.json",
		"append":   "stepfunctions-append.json",
		"await":    "stepfunctions-await.json",
	}
	vars := map[string]string{"CID": "c_nosuch", "TID": "t_nosuch", "CALL": "call_t_nosuch_1", "REPLY": "null"}
	for _, name := range stepFunctions {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fDown := startFunction(t, name, stepEnv(down, aws, nil))
			fUp := startFunction(t, name, stepEnv(good, aws, nil))
			tests := []struct {
				f    *function
				ev   []byte
				want string
			}{
				{fDown, event(t, events[name], vars), "TransientError"},
				{fDown, event(t, "stepfunctions-bad-payload.json", vars), "InputError"},
				{fUp, event(t, events[name], vars), "NotFoundError"},
			}
			for _, tt := range tests {
				if e := tt.f.fail(tt.ev); e.Type != tt.want || e.Message == "" {
					t.Errorf("%s(%s) error = %+v, want errorType %s with a message", name, tt.ev, e, tt.want)
				}
			}
		})
	}
}

// A function whose configuration is wrong does not start: it exits before
// asking for an event (Lambda reports Runtime.ExitError), and says why.
func TestColdStartWithoutValkey(t *testing.T) {
	t.Parallel()
	for _, name := range stepFunctions {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := startFunction(t, name, map[string]string{"ARTIFACT_BUCKET": artifactBucket})
			select {
			case <-f.exited:
			case <-f.ready:
				t.Fatalf("%s asked for an event without VALKEY_URL", name)
			case <-time.After(20 * time.Second):
				t.Fatalf("%s neither exited nor asked for an event", name)
			}
			if f.waitErr == nil || !strings.Contains(f.out.String(), "VALKEY_URL") {
				t.Errorf("%s exited with %v, output %q; want a failure naming VALKEY_URL", name, f.waitErr, f.out)
			}
		})
	}
}

// The demo specialists' function answers a Function URL event: the agent
// card, with its URL taken from the request's host.
func TestDemoAgentsFunctionURL(t *testing.T) {
	t.Parallel()
	f := startFunction(t, "demoagents", nil)
	var card struct {
		Name   string `json:"name"`
		URL    string `json:"url"`
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
	}
	request(t, f, event(t, "function-url-agent-card.json", nil), http.StatusOK, &card)
	if card.Name == "" || !strings.HasPrefix(card.URL, "https://abcdefg.lambda-url.us-east-1.on.aws/agents/svg") || len(card.Skills) == 0 {
		t.Errorf("agent card = %+v, want a named card with skills at the function URL", card)
	}
}

// BenchmarkColdInit is the cold start of each function: from the process's
// start to its first GET …/invocation/next, with its whole environment (a
// live Valkey over TCP). ms/init is the mean; median-ms the median;
// cpu-median-ms the median CPU time the process spent until then (Linux),
// which other work on the machine moves less.
//
//	go test -run '^$' -bench ColdInit -benchtime 20x ./functions/
//
// LAMBDA_BIN_DIR runs prebuilt binaries (another revision's) instead.
func BenchmarkColdInit(b *testing.B) {
	env := stepEnv(valkeyURL(b), nil, nil)
	for _, name := range append([]string{"api"}, append(stepFunctions, "demoagents")...) {
		b.Run(name, func(b *testing.B) {
			binaries(b)
			var took, cpu []time.Duration
			for b.Loop() {
				f := startFunction(b, name, env)
				took = append(took, f.awaitReady())
				cpu = append(cpu, f.readyCPU)
				f.stop()
			}
			sort.Slice(cpu, func(i, j int) bool { return cpu[i] < cpu[j] })
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			var sum time.Duration
			for _, d := range took {
				sum += d
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(sum/time.Duration(len(took))), "ms/init")
			b.ReportMetric(ms(took[len(took)/2]), "median-ms")
			if cpu[len(cpu)/2] > 0 {
				b.ReportMetric(ms(cpu[len(cpu)/2]), "cpu-median-ms")
			}
		})
	}
}
