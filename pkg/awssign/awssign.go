// Package awssign signs HTTP requests with AWS Signature V4: the one
// RoundTripper of every signed client of the platform (A2A calls to Lambda
// Function URLs, pkg/agentauth; traces to X-Ray's OTLP endpoint,
// pkg/telemetry; the calls made without the SDK's service clients,
// Service and Send: Secrets Manager's GetSecretValue, pkg/awssecrets, and
// Bedrock's ApplyGuardrail, pkg/guardian/bedrock).
//
// It signs what it is given and nothing more: it must not decide which
// requests deserve credentials beyond the host filter its caller sets, nor
// load credentials itself.
package awssign

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/clientagent/clientagent/pkg/keepalive"
)

// Transport signs each request it sends for Service in Region (redirects
// included, each with its own signature), with the body's SHA-256 in
// X-Amz-Content-Sha256 as services such as Lambda Function URLs require.
type Transport struct {
	Base    http.RoundTripper // default keepalive.Transport
	Creds   aws.CredentialsProvider
	Region  string
	Service string
	// Only, when set, names the hosts to sign; others pass unsigned.
	Only func(host string) bool

	signer *v4.Signer
	now    func() time.Time
}

// NewTransport is the Transport signing for service in region over base
// (nil: keepalive.Transport).
func NewTransport(base http.RoundTripper, creds aws.CredentialsProvider, region, service string) *Transport {
	if base == nil {
		base = keepalive.Transport
	}
	return &Transport{Base: base, Creds: creds, Region: region, Service: service, signer: v4.NewSigner(), now: time.Now}
}

// Client returns a copy of base (nil: a new client) whose requests are
// signed for service in region.
func Client(base *http.Client, creds aws.CredentialsProvider, region, service string) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	c.Transport = NewTransport(c.Transport, creds, region, service)
	return &c
}

// RoundTrip signs a copy of req (a RoundTripper must not change its
// request), its body read once to hash it and replayable for the
// transport's retries.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = keepalive.Transport
	}
	if t.Only != nil && !t.Only(req.URL.Hostname()) {
		return base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("sigv4: read body: %w", err)
		}
		body = b
	}
	if t.Creds == nil {
		return nil, errors.New("sigv4: no credentials")
	}
	creds, err := t.Creds.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("sigv4: credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	r := req.Clone(req.Context())
	r.ContentLength = int64(len(body))
	r.Body, r.GetBody = http.NoBody, nil
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	r.Header.Set("X-Amz-Content-Sha256", hash)
	signer, now := t.signer, t.now
	if signer == nil {
		signer = v4.NewSigner()
	}
	if now == nil {
		now = time.Now
	}
	if err := signer.SignHTTP(req.Context(), creds, r, hash, t.Service, t.Region, now().UTC()); err != nil {
		return nil, fmt.Errorf("sigv4: sign: %w", err)
	}
	return base.RoundTrip(r)
}
