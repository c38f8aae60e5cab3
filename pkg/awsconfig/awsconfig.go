// Package awsconfig is the AWS SDK configuration of the project's
// programs, from their environment, without the SDK's shared-config
// chain.
//
// A Lambda function's environment holds everything it needs: the
// region (AWS_REGION) and the role's credentials (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). The SDK's config package
// also reads shared config files and links the SSO, SSO OIDC, STS and
// sign-in clients for the profiles it may find there; their package
// initialisers alone cost milliseconds of every cold start. So the
// functions load their configuration here, and the programs a person
// runs with a profile (the clientagent command: the local stack, the
// CLI) call sharedconfig.Use, which loads the SDK's whole default chain
// instead.
//
// What Load reads:
//
//	AWS_REGION, AWS_DEFAULT_REGION      the region (Options.Region wins)
//	AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
//	                                    static credentials (Lambda's)
//	AWS_CONTAINER_CREDENTIALS_FULL_URI, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI,
//	AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)
//	                                    a container credentials endpoint
//	                                    (ECS, EKS Pod Identity), refreshed
//	                                    before it expires
//	AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>
//	                                    endpoints (tests, local emulators)
//	AWS_MAX_ATTEMPTS                    attempts per request (Options.MaxAttempts wins)
package awsconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
)

// Options are what a caller sets beside the environment.
type Options struct {
	// Region overrides the environment's region.
	Region string
	// MaxAttempts, when above 0, is the attempts per request.
	MaxAttempts int
}

// Loader loads a configuration.
type Loader func(ctx context.Context, o Options) (aws.Config, error)

var loader atomic.Pointer[Loader]

// Use makes Load call l (sharedconfig.Use sets the SDK's default chain).
func Use(l Loader) { loader.Store(&l) }

// Load is the AWS configuration of this program: the environment's
// (FromEnv), or the loader set by Use.
func Load(ctx context.Context, o Options) (aws.Config, error) {
	if l := loader.Load(); l != nil {
		return (*l)(ctx, o)
	}
	return FromEnv(ctx, o)
}

// containerHost is the link-local address of the ECS credentials endpoint
// that AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is relative to.
const containerHost = "http://169.254.170.2"

// FromEnv is the configuration the environment variables give (see the
// package documentation). It makes no request.
func FromEnv(ctx context.Context, o Options) (aws.Config, error) {
	cfg := aws.Config{
		Region:        firstSet(o.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")),
		ConfigSources: []any{envEndpoints{}},
	}
	if e := os.Getenv("AWS_ENDPOINT_URL"); e != "" {
		cfg.BaseEndpoint = aws.String(e)
	}
	cfg.RetryMaxAttempts = o.MaxAttempts
	if cfg.RetryMaxAttempts <= 0 {
		if s := os.Getenv("AWS_MAX_ATTEMPTS"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return aws.Config{}, fmt.Errorf("AWS_MAX_ATTEMPTS=%q: want a positive integer", s)
			}
			cfg.RetryMaxAttempts = n
		}
	}
	creds, err := credentialsFromEnv()
	if err != nil {
		return aws.Config{}, err
	}
	cfg.Credentials = creds
	return cfg, nil
}

func credentialsFromEnv() (aws.CredentialsProvider, error) {
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" && secret != "" {
		return credentials.NewStaticCredentialsProvider(id, secret, os.Getenv("AWS_SESSION_TOKEN")), nil
	}
	uri := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
	if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); uri == "" && rel != "" {
		uri = containerHost + rel
	}
	if uri == "" {
		return noCredentials{}, nil
	}
	p := endpointcreds.New(uri, func(o *endpointcreds.Options) {
		o.AuthorizationToken = os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		if file := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); file != "" {
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(file)
				return strings.TrimSpace(string(b)), err
			})
		}
	})
	return aws.NewCredentialsCache(p), nil
}

// noCredentials fails the first request that needs credentials, saying
// where they were looked for.
type noCredentials struct{}

var errNoCredentials = errors.New("awsconfig: no AWS credentials in the environment " +
	"(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI); " +
	"shared config files and profiles are read by the clientagent command only")

func (noCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errNoCredentials
}

// envEndpoints gives each service client its AWS_ENDPOINT_URL_<SERVICE>
// (the service's SDK id in capitals, spaces as underscores), as the SDK's
// own environment configuration does.
type envEndpoints struct{}

func (envEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	e := os.Getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return e, e != "", nil
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
