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

func TestBrowser(t *testing.T) {
	root := repoRoot(t)
	node := needBrowser(t, root)

	st, err := devstack.Start(t.Context(), devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
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

	// Sequential on purpose: each script starts its own Chromium, and the
	// machine is shared.
	for _, script := range []string{
		"popelnase.mjs", // spec §1/§2: svg → png chain, PNG shown inline
		"approval.mjs",  // spec §3.3: approval shows the exact arguments, Approve resumes
	} {
		t.Run(script, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, filepath.Join(root, "e2e", "browser", script))
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CLIENTAGENT_URL="+st.URL(), "CLIENTAGENT_TOKEN="+tok)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.WaitDelay = 5 * time.Second
			if err := cmd.Run(); err != nil {
				t.Fatalf("node %s: %v\n%s", script, err, out.String())
			}
			t.Logf("node %s:\n%s", script, out.String())
		})
	}
}
