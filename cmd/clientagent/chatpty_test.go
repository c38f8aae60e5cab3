package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/llm"
)

// thinker is a model that thinks until released: its turn runs as long as
// the test needs it to.
type thinker struct{ called, release chan struct{} }

func (m thinker) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	select {
	case m.called <- struct{}{}:
	default:
	}
	select {
	case <-m.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Text: "done thinking"}, nil
}

// ptyOutput collects what the chat writes to its terminal.
type ptyOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *ptyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits until the output holds want after from (a generous
// deadline, not a sleep) and returns where it ends.
func (o *ptyOutput) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if s := o.String(); len(s) >= from {
			if i := strings.Index(s[from:], want); i >= 0 {
				return from + i + len(want)
			}
		}
	}
	t.Fatalf("the chat never showed %q; it showed:\n%s", want, o.String())
	return 0
}

// `clientagent chat` in a real terminal (a pty, whose line discipline turns
// Ctrl-C into SIGINT as a user's terminal does): Ctrl-C while a turn runs
// stops the turn and returns to the prompt; Ctrl-C at the prompt clears the
// line; Ctrl-D leaves with status 0; `chat --help` exits 0.
func TestChatSignalsInATerminal(t *testing.T) {
	help := exec.Command(os.Args[0], "chat", "--help")
	help.Env = append(os.Environ(), "CLIENTAGENT_TEST_MAIN=1")
	if err := help.Run(); err != nil {
		t.Errorf("chat --help = %v, want exit status 0", err)
	}
	m := thinker{called: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(m.release) })
	st, err := devstack.Start(t.Context(), devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), LLM: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tok, err := st.Token("dev")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "chat", "--url", st.URL(), "--token", tok, "--out", t.TempDir())
	cmd.Env = append(os.Environ(), "CLIENTAGENT_TEST_MAIN=1")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out := &ptyOutput{}
	go func() { _, _ = io.Copy(out, tty) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	at := out.waitFor(t, 0, "> ")
	if _, err := tty.Write([]byte("think hard\r")); err != nil {
		t.Fatal(err)
	}
	at = out.waitFor(t, at, "think hard")
	select { // the turn runs: Ctrl-C during it (the model never answers)
	case <-m.called:
	case <-time.After(30 * time.Second):
		t.Fatalf("the model was never called; output:\n%s", out.String())
	}
	if _, err := tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	at = out.waitFor(t, at, "stopped:")
	at = out.waitFor(t, at, "> ")
	// Ctrl-C at the prompt, with a half-typed line: a new prompt, still running.
	if _, err := tty.Write([]byte("half a li")); err != nil {
		t.Fatal(err)
	}
	at = out.waitFor(t, at, "half a li")
	if _, err := tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, at, "> ")
	select {
	case err := <-exited:
		t.Fatalf("the chat ended at a Ctrl-C at the prompt (%v); output:\n%s", err, out.String())
	default:
	}
	// Ctrl-D leaves, with status 0.
	if _, err := tty.Write([]byte{4}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the chat after Ctrl-D = %v, want exit status 0; output:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the chat did not end at Ctrl-D; output:\n%s", out.String())
	}
	// The stopped turn reads cancelled.
	if !strings.Contains(out.String(), "Cancelled at your request") {
		t.Errorf("output = %q, want the turn's cancel", out.String())
	}
}
