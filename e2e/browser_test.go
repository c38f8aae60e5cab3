// Package e2e runs the web page in a real headless Chromium against the
// whole local stack in process (pkg/devstack: scripted demo model, embedded
// Valkey, demo agents). The browser side is e2e/browser/*.mjs, driven by
// playwright-core from the repository's node_modules.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/livepub/livepubtest"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/turn"
)

const chromium = "/usr/bin/chromium"

// repoRoot is the repository root (this file lives in <root>/e2e).
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Dir(filepath.Dir(file))
}

// needBrowser skips when the browser tooling is absent: these checks need
// Debian's chromium and `npm install` (playwright-core), not just Go.
func needBrowser(t *testing.T, root string) string {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("skipping browser test: %s not found (apt-get install -y chromium)", chromium)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "playwright-core")); err != nil {
		t.Skip("skipping browser test: node_modules/playwright-core missing (run npm install in the repository root)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping browser test: node not found on PATH")
	}
	return node
}

// script is one browser check and the stack it needs.
type script struct {
	file   string
	expiry bool // run against the stack whose pauses expire after 2 s
	slow   bool // run against the stack whose model streams its answer slowly
	live   bool // run against the stack that publishes to an AppSync Events fake
}

func TestBrowser(t *testing.T) {
	root := repoRoot(t)
	node := needBrowser(t, root)

	// Content capture on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT),
	// so each LLM call's inspector has what it sent and got.
	capture := telemetry.Disabled()
	capture.CaptureContent = true
	stack := startStack(t, devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tracing: capture})
	// A second stack whose forms and approvals expire quickly, so the
	// expiry is seen in the browser without waiting the default 24 h.
	short := devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Limits: turn.DefaultLimits()}
	short.Limits.AwaitTimeout = 2 * time.Second
	expiring := startStack(t, short)
	// A third whose demo model streams its answer in chunks 100 ms apart
	// (a few seconds for the help text), so a reply is seen growing and a
	// turn can be stopped while it runs.
	slow := startStack(t, devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), ChunkDelay: 100 * time.Millisecond})

	// A fourth that publishes its live events to an in-process AppSync
	// Events fake, as a deployment does; its GET /v1/info sends the page
	// there.
	live := startLiveStack(t)

	// Sequential on purpose: each script starts its own Chromium, and the
	// machine is shared.
	for _, sc := range []script{
		{file: "popelnase.mjs"},            // docs/design.md §1/§2: svg → png chain, PNG shown inline
		{file: "appsync.mjs", live: true},  // issue 27: live events over an AppSync Events WebSocket when the deployment says so
		{file: "svg-script.mjs"},           // issue 27: an SVG carrying script runs none of it (img, downloads, its blob: document)
		{file: "approval.mjs"},             // docs/design.md §3.3: approval shows the exact arguments, Approve resumes
		{file: "form.mjs"},                 // docs/design.md §3.3/§3.4: typed form for a user-input field, empty/invalid answers refused inline
		{file: "reject.mjs"},               // docs/design.md §3.3: Reject with a note runs nothing, the reply says so
		{file: "approval-edit.mjs"},        // docs/api/openapi.yaml: edited arguments go with the approval's id; bad JSON and invalid_arguments shown inline
		{file: "approval-stale.mjs"},       // docs/api/openapi.yaml: 409 stale_approval reloads the turn and shows the new approval
		{file: "supersede.mjs"},            // docs/design.md §3.3, docs/api/openapi.yaml: free text supersedes a waiting turn
		{file: "restore.mjs"},              // docs/design.md §3.1: a reload restores the conversation from the record
		{file: "workflow.mjs"},             // docs/design.md §3.4, issue 8: a workflow started from the page, missing input asked in a form
		{file: "expire.mjs", expiry: true}, // docs/design.md §3.3: an unanswered approval expires, nothing runs
		{file: "stream.mjs", slow: true},   // issue 15: the reply grows while the turn runs; a second tab follows live; reload, back/forward land on #/c/{cid}
		{file: "stop.mjs", slow: true},     // issue 15: Stop cancels a running turn
		{file: "markdown.mjs"},             // issue 15: markdown rendered, a <script> in a reply inert, artifact ids shown as links
		{file: "list.mjs"},                 // issue 15: no empty rows, title from the first message, rename, delete after confirmation
		{file: "narrow.mjs"},               // issue 15: at 390 px the list is a drawer
		{file: "fallback.mjs"},             // issue 15: without the event stream the page polls
		{file: "store.mjs"},                // issue 28: the sidebar says where conversations are kept
		{file: "details.mjs"},              // issue 28: title tooltips, the text limit checked before sending, the sidebar's waiting status, a pasted #token= link
		{file: "live-list.mjs"},            // issue 28: the conversation list follows GET /v1/events (created, status, renamed, deleted elsewhere)
		{file: "resend.mjs"},               // issue 28: Regenerate and Edit the last message: a new turn replaces it, the old one kept, marked
		{file: "search.mjs"},               // issue 28: conversation search by title and text (GET /v1/conversations?q=)
		{file: "waterfall.mjs"},            // issue 16: the turn's steps as a waterfall (timing, status, tokens; arguments and result on demand), the turn's tokens
	} {
		t.Run(sc.file, func(t *testing.T) {
			st := stack
			switch {
			case sc.expiry:
				st = expiring
			case sc.slow:
				st = slow
			case sc.live:
				st = live
			}
			ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, filepath.Join(root, "e2e", "browser", sc.file))
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CLIENTAGENT_URL="+st.url, "CLIENTAGENT_TOKEN="+st.token)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.WaitDelay = 5 * time.Second
			if err := cmd.Run(); err != nil {
				t.Fatalf("node %s: %v\n%s", sc.file, err, out.String())
			}
			t.Logf("node %s:\n%s", sc.file, out.String())
		})
	}
}

// TestBrowserAgainstFakeAPI runs the checks that need what the local stack
// does not do: an API answering 503 for a while (a paused store), and
// artifacts downloaded like on AWS (a 302 to a signed link that refuses a
// second Authorization). e2e/browser/fake-api.mjs plays the API.
func TestBrowserAgainstFakeAPI(t *testing.T) {
	root := repoRoot(t)
	node := needBrowser(t, root)
	fake := startFakeAPI(t, node, root)
	for _, file := range []string{
		"unavailable.mjs",   // 503 store_unavailable: "unavailable, retrying", one poll per Retry-After
		"artifact-link.mjs", // ?redirect=false, then the link fetched without the token
		"waterfall.mjs",     // issue 16: a running bar grows; the turn's cost and cached tokens shown when not 0
	} {
		t.Run(file, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, filepath.Join(root, "e2e", "browser", file))
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CLIENTAGENT_URL="+fake.url, "CLIENTAGENT_TOKEN="+fake.token)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.WaitDelay = 5 * time.Second
			if err := cmd.Run(); err != nil {
				t.Fatalf("node %s: %v\n%s", file, err, out.String())
			}
			t.Logf("node %s:\n%s", file, out.String())
		})
	}
}

// startFakeAPI starts e2e/browser/fake-api.mjs on a free port, its turns'
// steps slow enough (1 s each) for an outage to fall inside a turn, and
// stops it when the test ends.
func startFakeAPI(t *testing.T, node, root string) runningStack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "e2e", "browser", "fake-api.mjs"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PORT=0", "FAKE_STEP_MS=1000")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start fake-api.mjs: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	var st runningStack
	sc := bufio.NewScanner(stdout)
	for (st.url == "" || st.token == "") && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CLIENTAGENT_URL="); ok {
			st.url = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "CLIENTAGENT_TOKEN="); ok {
			st.token = v
		}
	}
	if st.url == "" || st.token == "" {
		t.Fatalf("fake-api.mjs printed no CLIENTAGENT_URL and CLIENTAGENT_TOKEN (%v)", sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return st
}

// startLiveStack starts a stack whose model streams slowly and which
// publishes to a livepubtest fake. The fake takes a token the stack's API
// accepts (GET /v1/info answers 200 with it) and reads its sub.
func startLiveStack(t *testing.T) runningStack {
	t.Helper()
	creds := aws.Credentials{AccessKeyID: "AKIDBROWSER", SecretAccessKey: "browser-secret"}
	var base string
	fake := livepubtest.New(t, func(tok string) (string, error) {
		req, _ := http.NewRequest("GET", base+"/v1/info", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("token refused by the API: %d", resp.StatusCode)
		}
		parts := strings.Split(tok, ".")
		if len(parts) != 3 {
			return "", errors.New("not a JWT")
		}
		b, err := base64.RawURLEncoding.DecodeString(parts[1])
		var claims struct {
			Sub string `json:"sub"`
		}
		if err != nil || json.Unmarshal(b, &claims) != nil || claims.Sub == "" {
			return "", errors.New("no sub")
		}
		return claims.Sub, nil
	}, creds)
	st := startStack(t, devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), ChunkDelay: 100 * time.Millisecond,
		Live: &devstack.Live{Config: fake.Config(), Credentials: credentials.StaticCredentialsProvider{Value: creds}}})
	base = st.url
	return st
}

// runningStack is a started local stack and a token for the user dev.
type runningStack struct {
	url, token string
}

func startStack(t *testing.T, cfg devstack.Config) runningStack {
	t.Helper()
	st, err := devstack.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("devstack.Start() = %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Stack.Close() = %v", err)
		}
	})
	tok, err := st.Token("dev")
	if err != nil {
		t.Fatalf("Stack.Token(dev) = %v", err)
	}
	return runningStack{url: st.URL(), token: tok}
}
