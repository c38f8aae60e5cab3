package awssign

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Service is an AWS service a package calls itself, without the SDK's
// client for it (whose package initialisers cost every cold start): where
// its requests go, how they are signed and how many attempts each gets.
type Service struct {
	// Name is the SigV4 signing name ("secretsmanager", "bedrock").
	Name string
	// Host is the service's host prefix: https://<Host>.<region>.amazonaws.com
	// (amazonaws.com.cn in the China regions; <Host>-fips with FIPS).
	Host        string
	Credentials aws.CredentialsProvider
	// Region is the region of a request that names none.
	Region string
	// Endpoint, when set, is the base URL of every request (tests, local
	// emulators).
	Endpoint string
	// HTTP carries the requests (nil: a client over keepalive.Transport).
	HTTP *http.Client
	// MaxAttempts bounds the attempts of one request (0: 3).
	MaxAttempts int
	// FIPS sends the requests to the service's FIPS endpoint
	// (AWS_USE_FIPS_ENDPOINT=true, as the SDKs read it).
	FIPS bool
}

// ServiceOf is the service name, at host, with cfg's region, credentials,
// attempts and HTTP client (when it is an *http.Client), and its endpoint
// from AWS_ENDPOINT_URL_<ID> (id as the SDK names the variable, e.g.
// SECRETS_MANAGER) or cfg's base endpoint.
func ServiceOf(cfg aws.Config, name, host, id string) Service {
	s := Service{Name: name, Host: host, Credentials: cfg.Credentials, Region: cfg.Region, MaxAttempts: cfg.RetryMaxAttempts}
	if c, ok := cfg.HTTPClient.(*http.Client); ok {
		s.HTTP = c
	}
	s.FIPS = strings.EqualFold(os.Getenv("AWS_USE_FIPS_ENDPOINT"), "true")
	if e := os.Getenv("AWS_ENDPOINT_URL_" + id); e != "" {
		s.Endpoint = e
	} else if cfg.BaseEndpoint != nil {
		s.Endpoint = *cfg.BaseEndpoint
	}
	return s
}

// Send sends the request build makes for the base URL of region (""
// for s.Region), signed for it, as Send does.
func (s Service) Send(ctx context.Context, region string, build func(ctx context.Context, base string) (*http.Request, error), retry func(Answer) bool) (Answer, error) {
	client, b := s.prepare(region, build)
	return Send(ctx, client, b, s.MaxAttempts, retry)
}

// Open is Send for an answer that streams, as Open does.
func (s Service) Open(ctx context.Context, region string, build func(ctx context.Context, base string) (*http.Request, error), retry func(Answer) bool) (Answer, io.ReadCloser, error) {
	client, b := s.prepare(region, build)
	return Open(ctx, client, b, s.MaxAttempts, retry)
}

// prepare is the signing client for region ("" for s.Region) and build
// bound to the base URL of its requests.
func (s Service) prepare(region string, build func(ctx context.Context, base string) (*http.Request, error)) (*http.Client, func(context.Context) (*http.Request, error)) {
	if region == "" {
		region = s.Region
	}
	base := strings.TrimSuffix(s.Endpoint, "/")
	if base == "" {
		base = s.regional(region)
	}
	return Client(s.HTTP, s.Credentials, region, s.Name), func(ctx context.Context) (*http.Request, error) { return build(ctx, base) }
}

// regional is the service's base URL in region: its host there, in the
// region's partition (amazonaws.com.cn in China), at its FIPS endpoint
// when s.FIPS.
func (s Service) regional(region string) string {
	host, domain := s.Host, "amazonaws.com"
	if s.FIPS {
		host += "-fips"
	}
	if strings.HasPrefix(region, "cn-") {
		domain = "amazonaws.com.cn"
	}
	return "https://" + host + "." + region + "." + domain
}
