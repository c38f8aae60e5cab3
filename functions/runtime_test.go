// Package functions_test runs the Lambda functions as they run on AWS: each
// main built with the Makefile's tags, started as a process under a Lambda
// Runtime API served by the test (GET …/invocation/next, POST
// …/response and …/error, /init/error), fed the event JSON Step Functions,
// EventBridge, API Gateway and Function URLs send (testdata/events). This
// exercises lambda.Start with -tags lambda.norpc, platform.Env and the
// event decoding, which the local stack (one process, the handlers called
// directly) never does.
package functions_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// buildTags are the Makefile's LAMBDA_TAGS (TestMakefileBuildsWithTheseTags).
const buildTags = "lambda.norpc,grpcnotrace"

// binDirEnv names a folder of prebuilt binaries (one per function, named
// after it) to run instead of building them, e.g. another revision's for
// BenchmarkColdInit.
const binDirEnv = "LAMBDA_BIN_DIR"

var build struct {
	once sync.Once
	dir  string
	tmp  string // removed by TestMain
	err  error
	took time.Duration
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.tmp != "" {
		_ = os.RemoveAll(build.tmp)
	}
	os.Exit(code)
}

// binaries builds every function once per test run, for this machine's
// GOOS and GOARCH with the Makefile's flags, and returns their folder.
func binaries(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		tb.Skip("go is not on PATH: the functions cannot be built for the runtime tests")
	}
	build.once.Do(func() {
		if d := os.Getenv(binDirEnv); d != "" {
			build.dir = d
			return
		}
		build.tmp, build.err = os.MkdirTemp("", "clientagent-functions-")
		if build.err != nil {
			return
		}
		build.dir = build.tmp
		started := time.Now()
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", buildTags, "-o", build.dir+string(filepath.Separator), "./...")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./functions/...: %v\n%s", err, out)
		}
		build.took = time.Since(started)
	})
	if build.err != nil {
		tb.Fatal(build.err)
	}
	return build.dir
}

// invocation is one event handed to the function at GET …/next.
type invocation struct {
	id      string
	payload []byte
}

// result is what the function posted for an invocation: its response, or
// (Err) its error document, with the POST's Content-Type and whether it
// came chunked, of unknown length (a streamed response).
type result struct {
	ID          string
	Body        []byte
	Err         bool
	ContentType string
	Chunked     bool
}

// lambdaError is the error document aws-lambda-go posts to …/error; the
// state machine's Retry and Catch match ErrorType.
type lambdaError struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
}

// function is one running function process and the Runtime API it polls.
type function struct {
	tb      testing.TB
	name    string
	api     *httptest.Server
	cmd     *exec.Cmd
	out     *syncBuffer
	started time.Time

	events    chan invocation
	results   chan result
	initError chan []byte
	ready     chan struct{} // closed at the first GET …/next
	readyOnce sync.Once
	readyAt   time.Time
	// readyCPU is the CPU time the process had spent at its first GET
	// …/next (all its threads; 0 where /proc does not say), a measure of
	// its cold start that other work on the machine moves less than the
	// wall time.
	readyCPU time.Duration
	pid      atomic.Int64
	exited   chan struct{} // closed when the process has ended
	waitErr  error
	seq      atomic.Int64
}

// startFunction starts the named function with env (and nothing of the
// test's own environment but PATH) under a Runtime API of its own. The
// process is killed at cleanup.
func startFunction(tb testing.TB, name string, env map[string]string) *function {
	tb.Helper()
	bin := filepath.Join(binaries(tb), name)
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("function binary: %v", err)
	}
	f := &function{tb: tb, name: name, out: &syncBuffer{}, events: make(chan invocation), results: make(chan result, 1),
		initError: make(chan []byte, 1), ready: make(chan struct{}), exited: make(chan struct{})}
	mux := http.NewServeMux()
	const base = "/2018-06-01/runtime"
	mux.HandleFunc("GET "+base+"/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		f.readyOnce.Do(func() {
			f.readyAt = time.Now()
			f.readyCPU = cpuTime(int(f.pid.Load()))
			close(f.ready)
		})
		select {
		case inv := <-f.events:
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:clientagent-test-"+name)
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-67d1e2f3-0123456789abcdef01234567;Sampled=0")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(inv.payload)
		case <-r.Context().Done():
		}
	})
	post := func(isErr bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusAccepted)
			f.results <- result{ID: r.PathValue("id"), Body: body, Err: isErr,
				ContentType: r.Header.Get("Content-Type"), Chunked: slices.Contains(r.TransferEncoding, "chunked")}
		}
	}
	mux.HandleFunc("POST "+base+"/invocation/{id}/response", post(false))
	mux.HandleFunc("POST "+base+"/invocation/{id}/error", post(true))
	mux.HandleFunc("POST "+base+"/init/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		select {
		case f.initError <- body:
		default:
		}
	})
	f.api = httptest.NewServer(mux)

	f.cmd = exec.Command(bin)
	f.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + tb.TempDir(), // no ~/.aws of the machine's
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(f.api.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=clientagent-test-" + name,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/clientagent-test-" + name,
		"AWS_LAMBDA_LOG_LEVEL=ERROR",
		"AWS_REGION=us-east-1",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDFUNCTIONSTEST",
		"AWS_SECRET_ACCESS_KEY=functions-test-secret",
		"AWS_SESSION_TOKEN=functions-test-token",
		"AWS_EC2_METADATA_DISABLED=true",
		"TZ=:UTC",
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f.cmd.Env = append(f.cmd.Env, k+"="+env[k])
	}
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	f.started = time.Now()
	if err := f.cmd.Start(); err != nil {
		f.api.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	f.pid.Store(int64(f.cmd.Process.Pid))
	go func() { f.waitErr = f.cmd.Wait(); close(f.exited) }()
	tb.Cleanup(f.stop)
	return f
}

// cpuTime is the time process pid's threads have run on a CPU so far
// (Linux's /proc/<pid>/task/*/schedstat, in nanoseconds), 0 when unknown.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// stop kills the process and closes its Runtime API.
func (f *function) stop() {
	select {
	case <-f.exited:
	default:
		_ = f.cmd.Process.Kill()
		<-f.exited
	}
	f.api.CloseClientConnections()
	f.api.Close()
}

// awaitReady waits for the first GET …/next: the end of the cold start.
func (f *function) awaitReady() time.Duration {
	f.tb.Helper()
	select {
	case <-f.ready:
		return f.readyAt.Sub(f.started)
	case <-f.exited:
		f.tb.Fatalf("%s exited before asking for an event (%v); its output:\n%s", f.name, f.waitErr, f.out)
	case b := <-f.initError:
		f.tb.Fatalf("%s reported an init error: %s", f.name, b)
	case <-time.After(20 * time.Second):
		f.tb.Fatalf("%s did not ask for an event within 20 s; its output:\n%s", f.name, f.out)
	}
	return 0
}

// invoke hands payload to the function and returns what it posted.
func (f *function) invoke(payload []byte) result {
	f.tb.Helper()
	id := fmt.Sprintf("req-%s-%d", f.name, f.seq.Add(1))
	timeout := time.After(30 * time.Second)
	select {
	case f.events <- invocation{id: id, payload: payload}:
	case <-f.exited:
		f.tb.Fatalf("%s exited (%v); its output:\n%s", f.name, f.waitErr, f.out)
	case <-timeout:
		f.tb.Fatalf("%s did not take the event within 30 s; its output:\n%s", f.name, f.out)
	}
	select {
	case r := <-f.results:
		if r.ID != id {
			f.tb.Fatalf("%s answered request %q, want %q", f.name, r.ID, id)
		}
		return r
	case <-f.exited:
		f.tb.Fatalf("%s exited during the invocation (%v); its output:\n%s", f.name, f.waitErr, f.out)
	case <-timeout:
		f.tb.Fatalf("%s did not answer within 30 s; its output:\n%s", f.name, f.out)
	}
	return result{}
}

// respond invokes the function and decodes its response into out; an
// error document fails the test.
func (f *function) respond(payload []byte, out any) {
	f.tb.Helper()
	r := f.invoke(payload)
	if r.Err {
		f.tb.Fatalf("%s(%s) failed: %s\nits output:\n%s", f.name, payload, r.Body, f.out)
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		f.tb.Fatalf("%s(%s): response %s: %v", f.name, payload, r.Body, err)
	}
}

// fail invokes the function and returns its error document; a response
// fails the test.
func (f *function) fail(payload []byte) lambdaError {
	f.tb.Helper()
	r := f.invoke(payload)
	if !r.Err {
		f.tb.Fatalf("%s(%s) = %s, want an error", f.name, payload, r.Body)
	}
	var e lambdaError
	if err := json.Unmarshal(r.Body, &e); err != nil {
		f.tb.Fatalf("%s: error document %s: %v", f.name, r.Body, err)
	}
	return e
}

// event reads testdata/events/name with its ${KEY} placeholders replaced.
func event(tb testing.TB, name string, vars map[string]string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "events", name))
	if err != nil {
		tb.Fatal(err)
	}
	var pairs []string
	for k, v := range vars {
		pairs = append(pairs, "${"+k+"}", v)
	}
	b = []byte(strings.NewReplacer(pairs...).Replace(string(b)))
	if bytes.Contains(b, []byte("${")) {
		tb.Fatalf("event %s: a placeholder is left: %s", name, b)
	}
	if !json.Valid(b) {
		tb.Fatalf("event %s is not JSON: %s", name, b)
	}
	return b
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// closedPort is a loopback address nothing listens on.
func closedPort(tb testing.TB) string {
	tb.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	return addr
}
