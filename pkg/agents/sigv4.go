package agents

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// AgentAuthEnv names the variable that chooses how requests to specialists
// authenticate: empty for none, "sigv4" for AWS Signature V4 (a Lambda
// Function URL with IAM auth, such as the demo agents' on AWS).
const AgentAuthEnv = "CLIENTAGENT_AGENT_AUTH"

// SigV4Service is the signing name of Lambda Function URLs.
const SigV4Service = "lambda"

// ClientFromEnv returns the HTTP client for A2A calls and agent-card
// fetches (RegistryOptions.HTTPClient, InvokerOptions.HTTPClient) that
// CLIENTAGENT_AGENT_AUTH asks for: nil (the default client) when it is
// empty, and with "sigv4" a client signing every request for the service
// lambda, with credentials from the default chain and the region from
// AWS_REGION. Any other value is an error, so a typo does not silently
// send unsigned requests. CLIENTAGENT_AGENT_TOKENS adds bearer tokens for
// the specialists that want one (AgentTokensEnv).
func ClientFromEnv(ctx context.Context, getenv func(string) string) (*http.Client, error) {
	c, err := authClientFromEnv(ctx, getenv)
	if err != nil {
		return nil, err
	}
	if v := getenv(AgentTokensEnv); v != "" {
		tokens, err := parseAgentTokens(v)
		if err != nil {
			return nil, err
		}
		c = withBearerTokens(c, tokens)
	}
	return c, nil
}

func authClientFromEnv(ctx context.Context, getenv func(string) string) (*http.Client, error) {
	switch mode := getenv(AgentAuthEnv); mode {
	case "":
		return nil, nil
	case "sigv4":
		region := getenv("AWS_REGION")
		if region == "" {
			return nil, fmt.Errorf("%s=sigv4 needs AWS_REGION", AgentAuthEnv)
		}
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
		if err != nil {
			return nil, fmt.Errorf("%s=sigv4: aws config: %w", AgentAuthEnv, err)
		}
		c := SigV4Client(nil, cfg.Credentials, region)
		// Only Lambda Function URLs get the role's signature: an agent at
		// any other host (CLIENTAGENT_AGENTS) never sees its credentials.
		c.Transport.(*sigV4Transport).only = func(host string) bool { return IsLambdaURLHost(host, region) }
		return c, nil
	default:
		return nil, fmt.Errorf("%s=%q: want empty or sigv4", AgentAuthEnv, mode)
	}
}

// SigV4Client returns a copy of base (nil: a new client) whose requests are
// signed with AWS Signature V4 for the service lambda in region. Only
// requests to specialists go through it; files agents return are fetched
// with another client, so credentials never sign a URL an agent chose.
func SigV4Client(base *http.Client, creds aws.CredentialsProvider, region string) *http.Client {
	return SigV4ServiceClient(base, creds, region, SigV4Service)
}

// SigV4ServiceClient is SigV4Client for another service's signing name,
// e.g. "appsync" for an AppSync Events API's HTTP publish (pkg/livepub).
func SigV4ServiceClient(base *http.Client, creds aws.CredentialsProvider, region, service string) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = &sigV4Transport{base: rt, creds: creds, region: region, service: service, signer: v4.NewSigner(), now: time.Now}
	return &c
}

// sigV4Transport signs each request it sends (redirects included, each with
// its own signature).
type sigV4Transport struct {
	base http.RoundTripper
	// only, when set, names the hosts to sign; others pass unsigned.
	only    func(host string) bool
	creds   aws.CredentialsProvider
	region  string
	service string
	signer  *v4.Signer
	now     func() time.Time
}

func (t *sigV4Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.only != nil && !t.only(req.URL.Hostname()) {
		return t.base.RoundTrip(req)
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
	if t.creds == nil {
		return nil, errors.New("sigv4: no credentials")
	}
	creds, err := t.creds.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("sigv4: credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	// Sign a copy (a RoundTripper must not change the request), its body
	// read once to hash it and replayable for the transport's retries.
	r := req.Clone(req.Context())
	r.ContentLength = int64(len(body))
	r.Body, r.GetBody = http.NoBody, nil
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	r.Header.Set("X-Amz-Content-Sha256", hash)
	if err := t.signer.SignHTTP(req.Context(), creds, r, hash, t.service, t.region, t.now().UTC()); err != nil {
		return nil, fmt.Errorf("sigv4: sign: %w", err)
	}
	return t.base.RoundTrip(r)
}

// IsLambdaURLHost reports whether host is a Lambda Function URL of region
// (<id>.lambda-url.<region>.on.aws).
func IsLambdaURLHost(host, region string) bool {
	id, ok := strings.CutSuffix(strings.ToLower(host), ".lambda-url."+strings.ToLower(region)+".on.aws")
	return ok && id != "" && !strings.Contains(id, ".")
}
