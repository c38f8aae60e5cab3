package lambdahttp

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.response.json")

// echo answers with what it saw of the request, so the golden responses
// pin down the event → request mapping; /binary answers non-text bytes.
func echo(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/binary" {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0, 0xff, 0xfe})
		return
	}
	body, _ := io.ReadAll(r.Body)
	var headers []string
	for k := range r.Header {
		headers = append(headers, k+": "+r.Header.Get(k))
	}
	sort.Strings(headers)
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	sub := ""
	if ev, ok := Event(r.Context()); ok && ev.RequestContext.Authorizer != nil && ev.RequestContext.Authorizer.JWT != nil {
		sub = ev.RequestContext.Authorizer.JWT.Claims["sub"]
	}
	http.SetCookie(w, &http.Cookie{Name: "seen", Value: "1", Path: "/"})
	http.SetCookie(w, &http.Cookie{Name: "other", Value: "2"})
	w.Header().Add("Vary", "Accept")
	w.Header().Add("Vary", "Cookie")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.Path, "raw_path": r.URL.EscapedPath(), "query": r.URL.Query(),
		"host": r.Host, "remote": r.RemoteAddr, "proto": r.Proto, "headers": headers, "cookies": cookies,
		"body_base64": base64.StdEncoding.EncodeToString(body), "content_length": r.ContentLength, "sub": sub,
	})
}

func TestGoldenEvents(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.request.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden events: %v", err)
	}
	a := New(http.HandlerFunc(echo))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".request.json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatalf("decode event: %v", err)
			}
			resp, err := a.Handle(t.Context(), ev)
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			got, _ := json.MarshalIndent(resp, "", "  ")
			golden := filepath.Join("testdata", name+".response.json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			var wantResp, gotResp events.APIGatewayV2HTTPResponse
			_ = json.Unmarshal(want, &wantResp)
			_ = json.Unmarshal(got, &gotResp)
			if diff := cmp.Diff(wantResp, gotResp); diff != "" {
				t.Errorf("Handle(%s) mismatch (-want +got):\n%s", name, diff)
			}
		})
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	t.Parallel()
	payload := []byte{0, 1, 2, 0xff, 0x89, 'P', 'N', 'G'}
	a := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	}))
	resp, err := a.Handle(t.Context(), events.APIGatewayV2HTTPRequest{
		RawPath: "/x", Body: base64.StdEncoding.EncodeToString(payload), IsBase64Encoded: true,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}},
	})
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	got, _ := base64.StdEncoding.DecodeString(resp.Body)
	if !resp.IsBase64Encoded || string(got) != string(payload) {
		t.Errorf("Handle() = base64 %v body %v, want the same bytes base64-encoded", resp.IsBase64Encoded, got)
	}
}

func TestIsText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ct   string
		body string
		want bool
	}{
		{"application/json; charset=utf-8", `{"a":1}`, true},
		{"image/svg+xml", "<svg/>", true},
		{"text/html", "<p>ä</p>", true},
		{"image/png", "PNG", false},
		{"application/octet-stream", "abc", false},
		{"text/plain", "\xff\xfe", false},
		{"", "plain", true},
		{"", "", true},
	}
	for _, tt := range tests {
		if got := isText(tt.ct, []byte(tt.body)); got != tt.want {
			t.Errorf("isText(%q, %q) = %v, want %v", tt.ct, tt.body, got, tt.want)
		}
	}
}

func TestBadEvents(t *testing.T) {
	t.Parallel()
	a := New(http.HandlerFunc(echo))
	for _, ev := range []events.APIGatewayV2HTTPRequest{
		{RawPath: "/x", Body: "not base64!", IsBase64Encoded: true},
		{RawPath: "no-leading-slash"},
	} {
		if _, err := a.Handle(t.Context(), ev); err == nil {
			t.Errorf("Handle(%+v) error = nil, want an error", ev)
		}
	}
}
