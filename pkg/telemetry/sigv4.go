package telemetry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// XRayService is the SigV4 signing name of X-Ray's OTLP endpoint
// (https://xray.<region>.amazonaws.com/v1/traces), which authorizes a
// request as xray:PutTraceSegments.
const XRayService = "xray"

var xrayHost = regexp.MustCompile(`^xray\.([a-z0-9-]+)\.amazonaws\.com$`)

// XRayRegion is the region of an X-Ray OTLP endpoint URL; ok is false for
// any other endpoint, whose requests are not signed.
func XRayRegion(endpoint string) (region string, ok bool) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" {
		return "", false
	}
	m := xrayHost.FindStringSubmatch(u.Hostname())
	if m == nil {
		return "", false
	}
	return m[1], true
}

// SigV4Client is an HTTP client signing each request with AWS Signature V4
// for service in region, with creds: the OTLP exporter's client for X-Ray's
// OTLP endpoint.
func SigV4Client(creds aws.CredentialsProvider, region, service string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &sigV4{base: http.DefaultTransport, creds: creds, region: region, service: service, signer: v4.NewSigner()}}
}

type sigV4 struct {
	base            http.RoundTripper
	creds           aws.CredentialsProvider
	region, service string
	signer          *v4.Signer
}

func (s *sigV4) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("sigv4: read body: %w", err)
		}
		body = b
	}
	sum := sha256.Sum256(body)
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	creds, err := s.creds.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("sigv4: credentials: %w", err)
	}
	if err := s.signer.SignHTTP(req.Context(), creds, r, hex.EncodeToString(sum[:]), s.service, s.region, time.Now()); err != nil {
		return nil, fmt.Errorf("sigv4: sign: %w", err)
	}
	return s.base.RoundTrip(r)
}
