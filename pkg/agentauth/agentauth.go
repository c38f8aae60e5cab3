// Package agentauth is how requests to specialists authenticate
// (CLIENTAGENT_AGENT_AUTH, CLIENTAGENT_AGENT_TOKENS): the HTTP client that
// card fetches and A2A calls go through, signing Lambda Function URLs with
// SigV4 (pkg/awssign) and sending each bearer token to its own origin.
//
// It must not carry anything but requests to specialists: files a
// specialist returns by URL are fetched with another client, so
// credentials never sign a URL an agent chose.
package agentauth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/awssign"
	"github.com/clientagent/clientagent/pkg/keepalive"
)

// AgentAuthEnv names the variable that chooses how requests to specialists
// authenticate: empty for none, "sigv4" for AWS Signature V4 (a Lambda
// Function URL with IAM auth, such as the demo agents' on AWS).
const AgentAuthEnv = "CLIENTAGENT_AGENT_AUTH"

// SigV4Service is the signing name of Lambda Function URLs.
const SigV4Service = "lambda"

// ClientFromEnv returns the HTTP client for A2A calls and agent-card
// fetches (agents.RegistryOptions.HTTPClient, agents.InvokerOptions.HTTPClient) that
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
		cfg, err := awsconfig.Load(ctx, awsconfig.Options{Region: region})
		if err != nil {
			return nil, fmt.Errorf("%s=sigv4: aws config: %w", AgentAuthEnv, err)
		}
		t := awssign.NewTransport(nil, cfg.Credentials, region, SigV4Service)
		// Only Lambda Function URLs get the role's signature: an agent at
		// any other host (CLIENTAGENT_AGENTS) never sees its credentials.
		t.Only = func(host string) bool { return IsLambdaURLHost(host, region) }
		return &http.Client{Transport: t}, nil
	default:
		return nil, fmt.Errorf("%s=%q: want empty or sigv4", AgentAuthEnv, mode)
	}
}

// IsLambdaURLHost reports whether host is a Lambda Function URL of region
// (<id>.lambda-url.<region>.on.aws).
func IsLambdaURLHost(host, region string) bool {
	id, ok := strings.CutSuffix(strings.ToLower(host), ".lambda-url."+strings.ToLower(region)+".on.aws")
	return ok && id != "" && !strings.Contains(id, ".")
}

// AgentTokensEnv gives specialists that want a bearer token theirs, e.g.
// another clientagent registered as a specialist: "<origin>=<token>",
// comma-separated (origin as scheme://host[:port]). A token goes only to
// its origin.
const AgentTokensEnv = "CLIENTAGENT_AGENT_TOKENS"

// parseAgentTokens reads AgentTokensEnv's value: origin → token.
func parseAgentTokens(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		origin, token, ok := strings.Cut(item, "=")
		u, err := url.Parse(strings.TrimSpace(origin))
		if !ok || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimSpace(token) == "" {
			return nil, fmt.Errorf("%s: want <scheme://host[:port]>=<token>, comma-separated (entry %q)", AgentTokensEnv, strings.SplitN(item, "=", 2)[0])
		}
		out[u.Scheme+"://"+u.Host] = strings.TrimSpace(token)
	}
	return out, nil
}

// bearerTransport adds a specialist's bearer token to requests to its
// origin that carry no Authorization of their own.
type bearerTransport struct {
	base   http.RoundTripper
	tokens map[string]string
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tok, ok := t.tokens[r.URL.Scheme+"://"+r.URL.Host]; ok && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return t.base.RoundTrip(r)
}

// withBearerTokens returns a copy of c (nil: a new client) that sends
// tokens to their origins.
func withBearerTokens(c *http.Client, tokens map[string]string) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	base := out.Transport
	if base == nil {
		base = keepalive.Transport
	}
	out.Transport = bearerTransport{base: base, tokens: tokens}
	return &out
}
