package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/record/valkey/localserver"
)

// TestMain lets a test run this binary as `clientagent` itself: with
// CLIENTAGENT_TEST_MAIN=1 it is the command, not the tests, so the restart
// tests start, signal and kill a real process.
func TestMain(m *testing.M) {
	if os.Getenv("CLIENTAGENT_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// devProcess is one `clientagent dev` process.
type devProcess struct {
	t     *testing.T
	cmd   *exec.Cmd
	url   string
	token string
	store string            // the banner's store line
	lines map[string]string // the banner's "name: value" lines
	done  chan struct{}
}

// startDev runs `clientagent dev` in dir on addr with path as PATH (and
// extra variables), and waits for its banner.
func startDev(t *testing.T, dir, addr, path string, extra ...string) *devProcess {
	t.Helper()
	p, err := launchDev(t, dir, addr, path, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startDevAnywhere is startDev on a loopback port that was free a moment
// ago, with extra made for that address. Another test can take such a port
// before the stack binds it; the stack then exits at once, and it is
// started again on another port.
func startDevAnywhere(t *testing.T, dir, path string, extra func(addr string) []string) (*devProcess, string) {
	t.Helper()
	for range 5 {
		addr := freeAddr(t)
		p, err := launchDev(t, dir, addr, path, extra(addr)...)
		if errors.Is(err, errAddrInUse) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return p, addr
	}
	t.Fatal("clientagent dev found each of 5 free ports taken")
	return nil, ""
}

// errAddrInUse is launchDev's error when the stack could not listen.
var errAddrInUse = errors.New("the address is in use")

// launchDev is startDev that returns what went wrong.
func launchDev(t *testing.T, dir, addr, path string, extra ...string) (*devProcess, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "dev")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "PATH" || k == "VALKEY_URL" || strings.HasPrefix(k, "CLIENTAGENT_") || strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "OTEL_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "CLIENTAGENT_TEST_MAIN=1", "CLIENTAGENT_ADDR="+addr, "PATH="+path,
		"CLIENTAGENT_STREAM_DELAY=0s", "CLIENTAGENT_LOG="+filepath.Join(dir, "clientagent.log"))
	cmd.Env = append(cmd.Env, extra...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &devProcess{t: t, cmd: cmd, url: "http://" + addr, done: make(chan struct{}), lines: map[string]string{}}
	banner := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		tokenNext := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case tokenNext:
				p.token, tokenNext = line, false
				banner <- nil
			case strings.HasPrefix(line, "token for the user dev:"):
				tokenNext = true
			case strings.HasPrefix(line, "  "):
				if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
					p.lines[k] = strings.TrimSpace(v)
				}
			}
		}
		banner <- fmt.Errorf("stdout closed before the banner's token")
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	select {
	case err := <-banner:
		p.store = p.lines["store"]
		if err != nil {
			<-p.done
			if strings.Contains(stderr.String()+p.log(), "address already in use") {
				return nil, fmt.Errorf("%w: %s", errAddrInUse, addr)
			}
			return nil, fmt.Errorf("clientagent dev: %v; stderr: %s; its log:\n%s", err, stderr.String(), p.log())
		}
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("clientagent dev printed no banner in 30 s; its log:\n%s", p.log())
	}
	return p, nil
}

func (p *devProcess) log() string {
	b, _ := os.ReadFile(filepath.Join(p.cmd.Dir, "clientagent.log"))
	return string(b)
}

// stop sends sig and waits for the process to end.
func (p *devProcess) stop(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.t.Fatalf("clientagent dev did not exit 20 s after %v", sig)
	}
	if sig == syscall.SIGTERM && p.cmd.ProcessState.ExitCode() != 0 {
		p.t.Errorf("clientagent dev exited %d after SIGTERM, want 0; its log:\n%s", p.cmd.ProcessState.ExitCode(), p.log())
	}
}

func (p *devProcess) do(method, path string, body any, out any) int {
	p.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.url+path, r)
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

type turnView struct {
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
	Reply  string `json:"reply"`
}

// popelnase creates a conversation, sends the reference prompt and waits
// for its turn to succeed.
func (p *devProcess) popelnase() (cid string, tv turnView) {
	p.t.Helper()
	var conv struct {
		ID string `json:"conversation_id"`
	}
	if code := p.do("POST", "/v1/conversations", map[string]any{}, &conv); code != http.StatusCreated {
		p.t.Fatalf("POST /v1/conversations = %d", code)
	}
	var sent turnView
	if code := p.do("POST", "/v1/conversations/"+conv.ID+"/messages", map[string]any{"text": "Create a PNG image with the word Popelnase"}, &sent); code != http.StatusAccepted {
		p.t.Fatalf("POST messages = %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.do("GET", "/v1/conversations/"+conv.ID+"/turns/"+sent.TurnID, nil, &tv)
		if tv.Status == "succeeded" {
			return conv.ID, tv
		}
		if tv.Status == "failed" || time.Now().After(deadline) {
			p.t.Fatalf("turn %s = %+v, want succeeded; log:\n%s", sent.TurnID, tv, p.log())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor polls cond until it holds or 15 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 29 and 28: `clientagent dev` keeps a conversation across a
// restart, after SIGTERM and after kill -9, with a Valkey server on PATH
// (its AOF under .data) and without one (the embedded store's snapshot).
func TestConversationSurvivesRestart(t *testing.T) {
	t.Parallel()
	serverBin := localserver.Find()
	if serverBin == "" {
		t.Fatalf("none of %v on PATH: install redis-server or valkey-server (.ci/run does)", localserver.Binaries)
	}
	tests := []struct {
		name     string
		path     func(t *testing.T) string
		kind     string
		sig      syscall.Signal
		wantLine string
	}{
		{"server SIGTERM", func(*testing.T) string { return filepath.Dir(serverBin) }, devstack.StoreServer, syscall.SIGTERM, "AOF)"},
		{"server kill -9", func(*testing.T) string { return filepath.Dir(serverBin) }, devstack.StoreServer, syscall.SIGKILL, "AOF)"},
		{"embedded SIGTERM", func(t *testing.T) string { return t.TempDir() }, devstack.StoreEmbedded, syscall.SIGTERM, "embedded Valkey: a snapshot"},
		{"embedded kill -9", func(t *testing.T) string { return t.TempDir() }, devstack.StoreEmbedded, syscall.SIGKILL, "embedded Valkey: a snapshot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, path := t.TempDir(), tt.path(t)
			first, addr := startDevAnywhere(t, dir, path, func(string) []string { return nil })
			storeDir := filepath.Join(dir, devstack.StoreDir(".data", addr))
			if !strings.Contains(first.store, tt.wantLine) {
				t.Fatalf("banner store line = %q, want it to contain %q", first.store, tt.wantLine)
			}
			var info struct {
				Store struct {
					Kind       string `json:"kind"`
					Persistent bool   `json:"persistent"`
				} `json:"store"`
			}
			if code := first.do("GET", "/v1/info", nil, &info); code != http.StatusOK || info.Store.Kind != tt.kind || !info.Store.Persistent {
				t.Fatalf("GET /v1/info = %d %+v, want kind %s, persistent", code, info, tt.kind)
			}
			cid, tv := first.popelnase()
			if tt.kind == devstack.StoreEmbedded && tt.sig == syscall.SIGKILL {
				// What a kill -9 keeps is the last periodic snapshot: wait
				// for one taken after the turn had ended.
				ended := time.Now()
				waitFor(t, "a snapshot after the turn", func() bool {
					fi, err := os.Stat(filepath.Join(storeDir, "embedded.snapshot"))
					return err == nil && fi.ModTime().After(ended)
				})
			}
			first.stop(tt.sig)
			if tt.kind == devstack.StoreServer {
				// The server goes with the stack, also after a kill -9 (the
				// kernel's parent-death signal): it removes its pidfile.
				waitFor(t, "the valkey server stopped with the stack", func() bool {
					_, err := os.Stat(filepath.Join(storeDir, "valkey.pid"))
					return os.IsNotExist(err)
				})
			}

			second := startDev(t, dir, addr, path)
			var conv struct {
				Turns []turnView `json:"turns"`
			}
			if code := second.do("GET", "/v1/conversations/"+cid, nil, &conv); code != http.StatusOK {
				t.Fatalf("GET /v1/conversations/%s after the restart = %d, want 200; log:\n%s", cid, code, second.log())
			}
			if len(conv.Turns) != 1 || conv.Turns[0].TurnID != tv.TurnID || conv.Turns[0].Status != "succeeded" || conv.Turns[0].Reply != tv.Reply {
				t.Fatalf("after the restart the conversation has %+v, want the turn %s succeeded with %q", conv.Turns, tv.TurnID, tv.Reply)
			}
			second.stop(syscall.SIGTERM)
		})
	}
}

// Issue 28: the README's CLIENTAGENT_MCP block, exported as written, does
// not stop the stack. Here the docs server's secret cannot be read (no AWS
// credentials, and no metadata service: no network) and the stdio server's
// command does not exist (npx would fetch a package); both are logged, the
// banner says so, and the stack serves turns. The banner also says that a
// guardian is on.
func TestREADMEMCPExampleStarts(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "export CLIENTAGENT_MCP='")
	if !ok {
		t.Fatal("README.md has no export CLIENTAGENT_MCP='…' block")
	}
	block, _, _ = strings.Cut(block, "'")
	if !strings.Contains(block, `"secret:`) || !strings.Contains(block, `"command": "npx"`) {
		t.Fatalf("the README's block changed; this test expects a secret header and an npx server:\n%s", block)
	}
	block = strings.Replace(block, `"command": "npx"`, `"command": "/nonexistent/npx"`, 1)
	dir := t.TempDir()
	p, _ := startDevAnywhere(t, dir, t.TempDir(), func(addr string) []string {
		return []string{"CLIENTAGENT_MCP=" + block, "CLIENTAGENT_STORE=memory",
			"CLIENTAGENT_GUARDIAN=a2a:http://" + addr + "/agents/guardian",
			"AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=us-east-1", "AWS_CONFIG_FILE=" + filepath.Join(dir, "no-aws-config"),
			"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-aws-credentials"), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_PROFILE="}
	})
	mcpLine := p.lines["MCP"]
	if !strings.Contains(mcpLine, "docs (not configured") || !strings.Contains(mcpLine, "everything (not reachable") {
		t.Errorf("banner MCP line = %q, want docs not configured and everything not reachable", mcpLine)
	}
	if g := p.lines["guardian"]; !strings.Contains(g, "/agents/guardian") {
		t.Errorf("banner guardian line = %q, want the guardian named", g)
	}
	if s := p.store; !strings.Contains(s, "in memory: lost on restart") {
		t.Errorf("banner store line = %q, want in memory", s)
	}
	log := p.log()
	if !strings.Contains(log, "MCP server not configured") || !strings.Contains(log, "docs-mcp-token") {
		t.Errorf("the log does not say that the docs server is not configured:\n%s", log)
	}
	p.popelnase()
	p.stop(syscall.SIGTERM)
}

// CLIENTAGENT_STORE chooses the store when VALKEY_URL is not set.
func TestStoreConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		vars    map[string]string
		want    devStore
		wantErr bool
	}{
		{name: "VALKEY_URL wins", vars: map[string]string{"VALKEY_URL": "redis://127.0.0.1:1/0", "CLIENTAGENT_STORE": "server"}},
		{name: "memory", vars: map[string]string{"CLIENTAGENT_STORE": "memory"}},
		{name: "embedded", vars: map[string]string{"CLIENTAGENT_STORE": "embedded"}, want: devStore{persist: true}},
		{name: "unknown", vars: map[string]string{"CLIENTAGENT_STORE": "disk"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeConfig(func(k string) string { return tt.vars[k] })
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("storeConfig() = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
