package awssign_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/clientagent/clientagent/pkg/awssign"
)

var authHeader = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=AKID/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$`)

// verify re-signs what arrived over the headers the client signed, as the
// service does, and says why the request is refused, or "ok".
func verify(r *http.Request, creds aws.Credentials, region, service string) string {
	m := authHeader.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return "unsigned"
	}
	if m[2] != region || m[3] != service {
		return "scope " + m[2] + "/" + m[3]
	}
	body, _ := io.ReadAll(r.Body)
	sum := sha256.Sum256(body)
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != hex.EncodeToString(sum[:]) {
		return "X-Amz-Content-Sha256 " + got
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "X-Amz-Date"
	}
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	for _, h := range strings.Split(m[4], ";") {
		if h != "host" {
			again.Header.Set(h, r.Header.Get(h))
		}
	}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, again, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		return err.Error()
	}
	if want := authHeader.FindStringSubmatch(again.Header.Get("Authorization")); want == nil || want[5] != m[5] {
		return "signature mismatch"
	}
	return "ok"
}

// One SigV4 transport for every signed client: the body's hash is sent and
// signed (Lambda Function URLs refuse a request without it), the signature
// verifies, and a host the filter leaves out gets no credentials.
func TestTransportSigns(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret", SessionToken: "tok"}
	verdicts := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verdicts <- verify(r, creds, "eu-central-1", "xray")
	}))
	defer srv.Close()
	tests := []struct {
		name string
		only func(string) bool
		body string
		want string
	}{
		{"with a body", nil, `{"spans":[]}`, "ok"},
		{"without a body", nil, "", "ok"},
		{"a host left out", func(string) bool { return false }, "x", "unsigned"},
	}
	for _, tt := range tests {
		tr := awssign.NewTransport(nil, credentials.StaticCredentialsProvider{Value: creds}, "eu-central-1", "xray")
		tr.Only = tt.only
		var body io.Reader
		if tt.body != "" {
			body = strings.NewReader(tt.body)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/traces?x=1", body)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		resp.Body.Close()
		if got := <-verdicts; got != tt.want {
			t.Errorf("%s: the server saw %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Open tries a throttled or failed attempt again as Send does, and hands
// back the first 200 answer unread, its body streaming; the signature of
// what arrives verifies, an escaped path label included.
func TestOpenStreamsTheFirstAnswerThatSucceeds(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}
	var calls int
	var refused []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if v := verify(r, creds, "eu-central-1", "bedrock"); v != "ok" {
			refused = append(refused, v)
		}
		if r.URL.EscapedPath() != "/model/a%3Ab/converse-stream" {
			refused = append(refused, "path "+r.URL.EscapedPath())
		}
		switch calls {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
			w.WriteHeader(http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "first frame|")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "second frame")
		}
	}))
	t.Cleanup(srv.Close)
	s := awssign.Service{Name: "bedrock", Credentials: credentials.StaticCredentialsProvider{Value: creds}, Region: "eu-central-1", Endpoint: srv.URL}
	build := func(ctx context.Context, base string) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodPost, base+"/model/a%3Ab/converse-stream", strings.NewReader(`{"messages":[]}`))
	}
	throttled := func(a awssign.Answer) bool { return a.Header.Get("X-Amzn-ErrorType") == "ThrottlingException" }
	a, body, err := s.Open(t.Context(), "", build, throttled)
	if err != nil || body == nil {
		t.Fatalf("Open() = %+v, %v, %v; want the third answer streaming", a, body, err)
	}
	defer body.Close()
	got, _ := io.ReadAll(body)
	if a.Status != http.StatusOK || a.Body != nil || string(got) != "first frame|second frame" || calls != 3 {
		t.Errorf("Open() = status %d, body field %q, stream %q after %d calls; want 200, no body, both frames, 3 calls", a.Status, a.Body, got, calls)
	}
	if len(refused) > 0 {
		t.Errorf("the server refused: %v", refused)
	}

	// An error answer after the attempts comes back read, with no stream.
	calls = 1 // the next is a throttling 400, then every call after it a 200
	s.MaxAttempts = 1
	a, body, err = s.Open(t.Context(), "", build, throttled)
	if err != nil || body != nil || a.Status != http.StatusBadRequest {
		t.Errorf("Open() with one attempt = %+v, %v, %v; want the 400 read, no stream", a, body, err)
	}
}

// A service without an endpoint of its own is reached at its regional
// host, in the region's partition, at its FIPS host when asked for.
func TestServiceRegionalEndpoint(t *testing.T) {
	t.Setenv("AWS_USE_FIPS_ENDPOINT", "")
	for _, tt := range []struct {
		region string
		fips   bool
		want   string
	}{
		{"eu-central-1", false, "https://bedrock-runtime.eu-central-1.amazonaws.com"},
		{"us-east-1", true, "https://bedrock-runtime-fips.us-east-1.amazonaws.com"},
		{"us-gov-west-1", true, "https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com"},
		{"cn-north-1", false, "https://bedrock-runtime.cn-north-1.amazonaws.com.cn"},
	} {
		s := awssign.Service{Name: "bedrock", Host: "bedrock-runtime", FIPS: tt.fips}
		if got := s.Regional(tt.region); got != tt.want {
			t.Errorf("Regional(%s, fips %v) = %s, want %s", tt.region, tt.fips, got, tt.want)
		}
	}
	t.Setenv("AWS_USE_FIPS_ENDPOINT", "true")
	if s := awssign.ServiceOf(aws.Config{Region: "us-east-1"}, "secretsmanager", "secretsmanager", "SECRETS_MANAGER"); !s.FIPS {
		t.Error("ServiceOf() with AWS_USE_FIPS_ENDPOINT=true: FIPS is false")
	}
}
