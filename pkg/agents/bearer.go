package agents

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

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
		base = http.DefaultTransport
	}
	out.Transport = bearerTransport{base: base, tokens: tokens}
	return &out
}
