package livepub

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/awssign"
	"github.com/clientagent/clientagent/pkg/livesub"
)

// Environment of a deployment that delivers live events through AppSync
// Events (the app stack sets them on the functions that publish, and on
// the api function, which tells clients where to subscribe):
const (
	// HTTPDomainEnv is the Event API's HTTP domain
	// (<id>.appsync-api.<region>.amazonaws.com); empty: no publishing.
	HTTPDomainEnv = "CLIENTAGENT_LIVE_HTTP_DOMAIN"
	// RealtimeDomainEnv is its realtime (WebSocket) domain.
	RealtimeDomainEnv = "CLIENTAGENT_LIVE_REALTIME_DOMAIN"
	// NamespaceEnv is the channel namespace (empty: DefaultNamespace).
	NamespaceEnv = "CLIENTAGENT_LIVE_NAMESPACE"
)

// SigV4Service is AppSync's signing name: the steps publish with their
// role (IAM authorization of the namespace's publish).
const SigV4Service = "appsync"

// Config is where a deployment's live events go.
type Config struct {
	// HTTPDomain and RealtimeDomain are the Event API's two domains (a
	// scheme may be given: http:// for the in-process fake).
	HTTPDomain, RealtimeDomain string
	Namespace                  string
}

// ConfigFromEnv reads the variables above; ok is false when
// CLIENTAGENT_LIVE_HTTP_DOMAIN is empty (the deployment has no push
// delivery).
func ConfigFromEnv(getenv func(string) string) (Config, bool, error) {
	c := Config{HTTPDomain: getenv(HTTPDomainEnv), RealtimeDomain: getenv(RealtimeDomainEnv), Namespace: getenv(NamespaceEnv)}
	if c.HTTPDomain == "" {
		return c, false, nil
	}
	if c.RealtimeDomain == "" {
		return c, false, fmt.Errorf("%s is set but %s is not", HTTPDomainEnv, RealtimeDomainEnv)
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if !livesub.ValidSegment(c.Namespace) {
		return c, false, fmt.Errorf("%s=%q: want 1-50 of A-Z, a-z, 0-9 and '-'", NamespaceEnv, c.Namespace)
	}
	return c, true, nil
}

// withScheme is d with https:// unless it names its scheme.
func withScheme(d, scheme string) string {
	if strings.Contains(d, "://") {
		return d
	}
	return scheme + "://" + d
}

// PublishURL is the HTTP publish endpoint, <http domain>/event.
func (c Config) PublishURL() string {
	return strings.TrimRight(withScheme(c.HTTPDomain, "https"), "/") + "/event"
}

// RealtimeURL is the WebSocket endpoint, wss://<realtime domain>/event/realtime.
func (c Config) RealtimeURL() string {
	u := withScheme(c.RealtimeDomain, "wss")
	u = strings.Replace(strings.Replace(u, "https://", "wss://", 1), "http://", "ws://", 1)
	return strings.TrimRight(u, "/") + "/event/realtime"
}

// Host is the HTTP domain's host, which a subscriber names in its
// authorization header.
func (c Config) Host() string {
	u, err := url.Parse(withScheme(c.HTTPDomain, "https"))
	if err != nil {
		return c.HTTPDomain
	}
	return u.Host
}

// FromEnv is the publisher of a function whose environment names an Event
// API (nil without one), signing with the function's role for region
// AWS_REGION, started until ctx ends.
func FromEnv(ctx context.Context, getenv func(string) string, owners Owners, log *slog.Logger) (*Publisher, error) {
	c, ok, err := ConfigFromEnv(getenv)
	if err != nil || !ok {
		return nil, err
	}
	region := getenv("AWS_REGION")
	if region == "" {
		return nil, fmt.Errorf("%s needs AWS_REGION", HTTPDomainEnv)
	}
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{Region: region})
	if err != nil {
		return nil, fmt.Errorf("live events: aws config: %w", err)
	}
	p := &Publisher{Endpoint: c.PublishURL(), Namespace: c.Namespace, Owners: owners, Logger: log,
		Client: awssign.Client(nil, cfg.Credentials, region, SigV4Service)}
	return p.Start(ctx), nil
}
