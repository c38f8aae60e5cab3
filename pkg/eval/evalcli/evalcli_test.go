package evalcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scenarios writes one passing and one failing scenario into a folder.
func scenarios(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"pass.yaml": "turns:\n  - text: Create an SVG with the word Hello\n    expect: {status: succeeded, tools: [create_svg_artifact]}\n",
		"fail.yaml": "turns:\n  - text: Create an SVG with the word Hello\n    expect: {tools: [convert_svg_to_png]}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// env is an environment with only the scripted demo model configured.
func env(k string) string {
	if k == "CLIENTAGENT_LLM" {
		return "scripted"
	}
	return ""
}

// The exit status follows --min-pass; the table names the failed
// expectation; the JSON report has the runs.
func TestRunMinPass(t *testing.T) {
	t.Parallel()
	dir := scenarios(t)
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{"below the default 1.0", []string{dir}, true},
		{"at the pass rate", []string{"--min-pass", "0.5", dir}, false},
		{"flags after the folder", []string{dir, "--min-pass", "0.6", "--repeat", "2"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			report := filepath.Join(t.TempDir(), "report.json")
			var out, errOut bytes.Buffer
			err := Run(t.Context(), append([]string{"--json", report}, tt.args...), Options{Stdout: &out, Stderr: &errOut, Getenv: env})
			if got := errors.Is(err, ErrBelowMinPass); got != tt.wantErr {
				t.Fatalf("Run(%q) error = %v, want ErrBelowMinPass: %v\n%s", tt.args, err, tt.wantErr, out.String())
			}
			if !strings.Contains(out.String(), "fail failed:\n  - turn 1: tools (sequence): want [convert_svg_to_png], got [create_svg_artifact]") {
				t.Errorf("Run() output =\n%s\nwant the failed expectation with its reason", out.String())
			}
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatalf("the JSON report: %v", err)
			}
			var rep struct {
				Runs      int     `json:"runs"`
				Passed    int     `json:"passed"`
				PassRate  float64 `json:"pass_rate"`
				OK        bool    `json:"ok"`
				Model     string  `json:"model"`
				Scenarios []struct {
					Name    string `json:"name"`
					Runs    int    `json:"runs"`
					Passed  int    `json:"passed"`
					Latency struct {
						Max float64 `json:"max"`
					} `json:"latency_ms"`
					Results []struct {
						Pass  bool `json:"pass"`
						Turns []struct {
							Status string `json:"status"`
						} `json:"turns"`
					} `json:"results"`
				} `json:"scenarios"`
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatalf("decode the JSON report: %v\n%s", err, b)
			}
			if rep.PassRate != 0.5 || rep.OK == tt.wantErr || rep.Runs != 2*rep.Scenarios[0].Runs || len(rep.Scenarios) != 2 || rep.Model == "" {
				t.Errorf("report = %d runs, %d passed, rate %v, ok %v, model %q, %d scenarios; want a pass rate of 0.5 and ok %v",
					rep.Runs, rep.Passed, rep.PassRate, rep.OK, rep.Model, len(rep.Scenarios), !tt.wantErr)
			}
			for _, s := range rep.Scenarios {
				if len(s.Results) != s.Runs || s.Latency.Max <= 0 || s.Results[0].Turns[0].Status != "succeeded" {
					t.Errorf("scenario %s = %d results of %d runs, max latency %v; want every run with its turn and latency", s.Name, len(s.Results), s.Runs, s.Latency.Max)
				}
			}
		})
	}
}

// refusing serves an API that refuses every token.
func refusing(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error": {"code": "unauthorized", "message": "a valid bearer token is required"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRunRefuses(t *testing.T) {
	t.Parallel()
	dir := scenarios(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no path", nil, "give one scenario file or folder"},
		{"a url without a token", []string{"--url", "http://127.0.0.1:1", dir}, "--url needs --token"},
		{"a rate above 1", []string{"--min-pass", "90", dir}, "between 0 and 1"},
		{"no scenarios", []string{t.TempDir()}, "no scenario files"},
		{"a token the API refuses", []string{"--url", refusing(t), "--token", "nope", dir}, "401 unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := Run(t.Context(), tt.args, Options{Stdout: &out, Stderr: &out, Getenv: env})
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrBelowMinPass) {
				t.Errorf("Run(%q) error = %v, want one containing %q", tt.args, err, tt.want)
			}
		})
	}
}
