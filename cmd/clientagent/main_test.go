package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/golang-jwt/jwt/v5"

	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/devstack"
)

// Issue 8: `clientagent workflows check` compiles templates against the
// specialists' real agent cards: a good template shows its derived inputs,
// a broken one is named with its reason and fails the command.
func TestCheckWorkflows(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nil)
	srv.Config.Handler = demoagents.Handler(srv.URL, demoagents.Options{})
	t.Cleanup(srv.Close)
	urls := demoagents.AgentURLs(srv.URL)

	good := fstest.MapFS{"flange.json": {Data: []byte(`{"id": "flange", "name": "Flange", "description": "d",
		"inputs": [{"path": "n"}, {"path": "m"}, {"path": "od"}],
		"steps": [{"skill": "design_valve_flange", "arguments": {"holes": "{{inputs.n}}", "material": "{{inputs.m}}", "outer_diameter_mm": "{{inputs.od}}"}}]}`)}}
	var out bytes.Buffer
	if err := checkWorkflows(t.Context(), good, urls, &out); err != nil {
		t.Fatalf("checkWorkflows(good) = %v\n%s", err, out.String())
	}
	for _, want := range []string{"ok    flange (workflow_flange)", "n: integer", "m: string [user input]", "od: number"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	bad := fstest.MapFS{"a.json": {Data: []byte(`{"id": "a", "steps": [{"skill": "convert_svg_to_png", "arguments": {"width": 100}}]}`)}}
	out.Reset()
	err := checkWorkflows(t.Context(), bad, urls, &out)
	if err == nil || !strings.Contains(out.String(), `error invalid workflow template: a: step 1 (convert_svg_to_png): convert_svg_to_png requires "artifact_id", which is bound to nothing`) {
		t.Errorf("checkWorkflows(bad) = %v, output:\n%s\nwant an error naming the unbound parameter", err, out.String())
	}
}

// Issue 24, point 8: `clientagent token` mints a token with the local
// stack's audience, which the running stack accepts.
func TestMintedTokenCarriesTheAudience(t *testing.T) {
	dir := t.TempDir()
	st, err := devstack.Start(t.Context(), devstack.Config{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tok, err := mint(dir, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &claims); err != nil || len(claims.Audience) != 1 || claims.Audience[0] != auth.DefaultAudience {
		t.Errorf("aud = %v (%v), want [%s]", claims.Audience, err, auth.DefaultAudience)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", st.URL()+"/v1/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/conversations with the minted token = %d, want 200", resp.StatusCode)
	}
}

// The local stack collects at GOGC=200 unless GOGC is set.
func TestDevCollectorTarget(t *testing.T) {
	if p, ok := gcPercent(func(string) string { return "" }); !ok || p != 200 {
		t.Errorf("gcPercent() without GOGC = %d, %v; want 200", p, ok)
	}
	if _, ok := gcPercent(func(k string) string { return map[string]string{"GOGC": "50"}[k] }); ok {
		t.Error("gcPercent() with GOGC=50 overrides it, want it left alone")
	}
}

// `clientagent dev --memprofile FILE` writes the stack's allocations as
// a heap profile when it stops, for the profile-led work of
// docs/benchmarks.md; without the flag nothing is written.
func TestMemProfileWrittenAtStop(t *testing.T) {
	t.Parallel()
	if err := profileMem("")(); err != nil {
		t.Errorf(`profileMem("")() = %v, want nil`, err)
	}
	path := filepath.Join(t.TempDir(), "mem.pprof")
	stop := profileMem(path)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the profile exists before the stack stops (%v)", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f) // a profile is gzipped protobuf
	if err != nil {
		t.Fatalf("the written profile is not a profile: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"alloc_space", "inuse_space"} {
		if !bytes.Contains(b, []byte(typ)) {
			t.Errorf("the profile has no %s samples", typ)
		}
	}
}
