// Package e2e runs the web page in a real headless Chromium against the
// whole local stack in process (pkg/devstack: scripted demo model, embedded
// Valkey, demo agents). The browser side is e2e/browser/*.mjs, driven by
// playwright-core from the repository's node_modules.
package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/devstack"
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
}

func TestBrowser(t *testing.T) {
	root := repoRoot(t)
	node := needBrowser(t, root)

	stack := startStack(t, devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	// A second stack whose forms and approvals expire quickly, so the
	// expiry is seen in the browser without waiting the default 24 h.
	short := devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Limits: turn.DefaultLimits()}
	short.Limits.AwaitTimeout = 2 * time.Second
	expiring := startStack(t, short)

	// Sequential on purpose: each script starts its own Chromium, and the
	// machine is shared.
	for _, sc := range []script{
		{file: "popelnase.mjs"},            // spec §1/§2: svg → png chain, PNG shown inline
		{file: "approval.mjs"},             // spec §3.3: approval shows the exact arguments, Approve resumes
		{file: "form.mjs"},                 // spec §3.3/§3.4: typed form for a user-input field, empty/invalid answers refused inline
		{file: "reject.mjs"},               // spec §3.3: Reject with a note runs nothing, the reply says so
		{file: "approval-edit.mjs"},        // API.md: edited arguments go with the approval's id; bad JSON and invalid_arguments shown inline
		{file: "approval-stale.mjs"},       // API.md: 409 stale_approval reloads the turn and shows the new approval
		{file: "supersede.mjs"},            // spec §3.3, API.md: free text supersedes a waiting turn
		{file: "restore.mjs"},              // spec §3.1: a reload restores the conversation from the record
		{file: "workflow.mjs"},             // spec §3.4, issue 8: a workflow started from the page, missing input asked in a form
		{file: "expire.mjs", expiry: true}, // spec §3.3: an unanswered approval expires, nothing runs
	} {
		t.Run(sc.file, func(t *testing.T) {
			st := stack
			if sc.expiry {
				st = expiring
			}
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
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
