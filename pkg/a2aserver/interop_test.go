package a2aserver_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/devstack"
)

// startStack starts a local stack on a free port with the demo model.
func startStack(t *testing.T, mutate ...func(*devstack.Config)) *devstack.Stack {
	t.Helper()
	cfg := devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()}
	for _, f := range mutate {
		f(&cfg)
	}
	st, err := devstack.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("devstack.Start() error = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestInteropJSClient drives clientagent's A2A endpoint on a local stack
// with the official JS SDK's client (testdata/client.mjs): a Popelnase
// message completes with a PNG it downloads, the valve flange streams to
// input-required with the material form and the answer on the same task
// completes it, and publish_word waits for its plan's approval.
func TestInteropJSClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("interop test needs node on PATH (and `npm install` in the repository root for @a2a-js/sdk)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		t.Skipf("interop test needs node_modules/@a2a-js/sdk in %s: run `npm install` there", root)
	}
	st := startStack(t)
	tok, err := st.Token("js-client")
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "A2A_BASE="+st.URL()+"/a2a", "A2A_TOKEN="+tok)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	var got struct {
		Card struct {
			URL       string   `json:"url"`
			Streaming bool     `json:"streaming"`
			Skills    []string `json:"skills"`
		} `json:"card"`
		Popelnase struct {
			State string `json:"state"`
			Reply string `json:"reply"`
			Files []struct {
				Name     string `json:"name"`
				MimeType string `json:"mimeType"`
				Size     int    `json:"size"`
				PNG      bool   `json:"png"`
				APISize  int    `json:"apiSize"`
			} `json:"files"`
		} `json:"popelnase"`
		Get struct {
			State     string `json:"state"`
			Artifacts int    `json:"artifacts"`
		} `json:"get"`
		CancelCompleted string `json:"cancelCompleted"`
		Flange          struct {
			States []string `json:"states"`
			State  string   `json:"state"`
			Kind   string   `json:"kind"`
			Fields []struct {
				Name string   `json:"name"`
				Enum []string `json:"enum"`
			} `json:"fields"`
		} `json:"flange"`
		FlangeAnswered struct {
			State    string   `json:"state"`
			SameTask bool     `json:"sameTask"`
			Reply    string   `json:"reply"`
			Files    []string `json:"files"`
		} `json:"flangeAnswered"`
		Publish struct {
			State    string `json:"state"`
			Kind     string `json:"kind"`
			Approval struct {
				ID    string `json:"id"`
				Calls []struct {
					Tool      string         `json:"tool"`
					Arguments map[string]any `json:"arguments"`
				} `json:"calls"`
			} `json:"approval"`
		} `json:"publish"`
		PublishAnswered struct {
			State string `json:"state"`
			Reply string `json:"reply"`
		} `json:"publishAnswered"`
		NoToken any    `json:"noToken"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &got); err != nil || runErr != nil {
		t.Fatalf("node client: %v / %v\nstdout: %s\nstderr: %s", runErr, err, stdout.String(), stderr.String())
	}
	t.Logf("node client saw: %s", stdout.String())

	if got.Card.URL != st.URL()+"/a2a" || !got.Card.Streaming || !contains(got.Card.Skills, "chat") || !contains(got.Card.Skills, "publish_word") {
		t.Errorf("card = %+v, want url %s/a2a, streaming, skills chat and publish_word", got.Card, st.URL())
	}
	p := got.Popelnase
	if p.State != "completed" || len(p.Files) == 0 {
		t.Fatalf("Popelnase task = %+v, want completed with files", p)
	}
	var png bool
	for _, f := range p.Files {
		png = png || f.MimeType == "image/png" && f.PNG && f.Size > 0 && f.Size == f.APISize
	}
	if !png || !strings.Contains(p.Reply, "Popelnase") {
		t.Errorf("Popelnase task = %+v, want a downloadable PNG (same bytes by link and API URL) and a reply naming the word", p)
	}
	if got.Get.State != "completed" || got.Get.Artifacts != len(p.Files) {
		t.Errorf("tasks/get = %+v, want completed with %d artifacts", got.Get, len(p.Files))
	}
	if !strings.Contains(strings.ToLower(got.CancelCompleted), "cancel") {
		t.Errorf("tasks/cancel of a completed task: %q, want a task-not-cancelable error", got.CancelCompleted)
	}
	f := got.Flange
	if f.State != "input-required" || f.Kind != "form" || len(f.Fields) != 1 || f.Fields[0].Name != "material" || !contains(f.Fields[0].Enum, "steel") {
		t.Errorf("flange stream ended with %+v, want input-required with the material form", f)
	}
	if len(f.States) < 2 || f.States[0] != "working" {
		t.Errorf("flange stream states = %v, want working first, then input-required", f.States)
	}
	fa := got.FlangeAnswered
	if fa.State != "completed" || !fa.SameTask || !contains(fa.Files, "image/svg+xml") || !strings.Contains(fa.Reply, "brass") {
		t.Errorf("flange answered = %+v, want the same task completed with an SVG drawing in brass", fa)
	}
	pw := got.Publish
	if pw.State != "input-required" || pw.Kind != "approval" || pw.Approval.ID == "" || len(pw.Approval.Calls) != 1 ||
		pw.Approval.Calls[0].Tool != "workflow_publish_word" || pw.Approval.Calls[0].Arguments["word"] != "Interop" {
		t.Errorf("publish_word = %+v, want input-required with the plan's approval (id, the call and its exact arguments)", pw)
	}
	if got.PublishAnswered.State != "completed" {
		t.Errorf("publish_word approved with yes = %+v, want completed", got.PublishAnswered)
	}
	if got.NoToken != float64(401) {
		t.Errorf("JSON-RPC without a token: %v, want HTTP 401", got.NoToken)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
