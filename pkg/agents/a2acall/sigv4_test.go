package a2acall

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/awssign"
	"github.com/clientagent/clientagent/pkg/tool"
)

var sigV4Header = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=AKIDTEST/(\d{8})/eu-central-1/lambda/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$`)

// sigV4Checker is a Function URL with IAM auth in miniature: it recomputes
// each request's signature from what arrived and records what it saw.
type sigV4Checker struct {
	t     *testing.T
	creds aws.Credentials
	next  http.Handler

	mu   sync.Mutex
	seen []string // "path: ok" or "path: <why not>"
}

func (c *sigV4Checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	verdict := c.check(r)
	c.mu.Lock()
	c.seen = append(c.seen, r.URL.Path+": "+verdict)
	c.mu.Unlock()
	if verdict != "ok" {
		http.Error(w, `{"message":"Forbidden"}`, http.StatusForbidden)
		return
	}
	c.next.ServeHTTP(w, r)
}

func (c *sigV4Checker) check(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "unsigned"
	}
	m := sigV4Header.FindStringSubmatch(auth)
	if m == nil {
		return "bad Authorization header " + auth
	}
	if tok := r.Header.Get("X-Amz-Security-Token"); tok != c.creds.SessionToken {
		return "security token " + tok
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != m[1] {
		return "bad X-Amz-Date " + r.Header.Get("X-Amz-Date")
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	// Re-sign what arrived, over the headers the client said it signed.
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	for _, h := range strings.Split(m[2], ";") {
		if h != "host" {
			again.Header.Set(h, r.Header.Get(h))
		}
	}
	if err := v4.NewSigner().SignHTTP(r.Context(), c.creds, again, r.Header.Get("X-Amz-Content-Sha256"), "lambda", "eu-central-1", at); err != nil {
		return "re-sign: " + err.Error()
	}
	if want := sigV4Header.FindStringSubmatch(again.Header.Get("Authorization")); want == nil || want[3] != m[3] {
		return "signature mismatch"
	}
	return "ok"
}

func (c *sigV4Checker) verdicts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// With CLIENTAGENT_AGENT_AUTH=sigv4 (a Function URL with IAM auth), the
// agent card and the A2A call are signed for the service lambda with a
// valid signature; a file the agent returns by URL is fetched unsigned
// (credentials never sign a URL an agent chose).
func TestSigV4SignsAgentRequests(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", SessionToken: "session"}
	exec := &testExecutor{release: make(chan struct{})}
	t.Cleanup(func() { close(exec.release) })
	mux := http.NewServeMux()
	checker := &sigV4Checker{t: t, creds: creds, next: mux}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/generated.png" { // the agent's file: not behind IAM
			checker.mu.Lock()
			checker.seen = append(checker.seen, "/generated.png: authorization="+r.Header.Get("Authorization"))
			checker.mu.Unlock()
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(pngBytes)
			return
		}
		checker.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	exec.baseURL = srv.URL
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	mux.HandleFunc("/rpc"+agents.AgentCardPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"name":"signed","url":"`+srv.URL+`/rpc","protocolVersion":"0.3.0","version":"1","skills":[{"id":"paint","name":"paint","description":"paints"}]}`)
	})

	hc := awssign.Client(nil, credentials.StaticCredentialsProvider{Value: creds}, "eu-central-1", "lambda")
	reg := agents.NewRegistry(agents.RegistryOptions{URLs: []string{srv.URL + "/rpc"}, HTTPClient: hc})
	caps, err := reg.Capabilities(t.Context())
	if err != nil || len(caps) != 1 || caps[0].Unavailable {
		t.Fatalf("Capabilities() = %+v, %v; want the signed agent's one skill (verdicts %v)", caps, err, checker.verdicts())
	}
	store := newMemStore(t)
	if _, err := store.Put(t.Context(), "c", "art_in", "text/plain", strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	inv := NewInvoker(InvokerOptions{HTTPClient: hc, Artifacts: store, FileOrigins: []string{srv.URL}})
	out := inv.Invoke(t.Context(), tool.Call{ConversationID: "c", TurnID: "t", CallID: "call_s",
		Capability: testCapability(srv.URL + "/rpc"), Arguments: map[string]any{"mode": "file"},
		Files: []artifact.Artifact{{ID: "art_in", Name: "in.txt", MimeType: "text/plain"}}})
	if out.Result.Status != "succeeded" {
		t.Fatalf("Invoke() = %+v, want succeeded (verdicts %v)", out.Result, checker.verdicts())
	}
	want := []string{"/rpc" + agents.AgentCardPath + ": ok", "/rpc: ok", "/generated.png: authorization="}
	if got := checker.verdicts(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests the agent saw:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
