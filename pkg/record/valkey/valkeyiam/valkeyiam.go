// Package valkeyiam authenticates Valkey clients to ElastiCache with IAM:
// each new connection sends the role's user id and an IAM auth token, a
// SigV4-presigned "connect" request valid for 15 minutes, instead of a
// password. The deployment switches it on (VALKEY_AUTH=iam, FromEnv); it
// must not be used against a server that expects a password, and it never
// contacts AWS itself: signing is local.
package valkeyiam

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// Environment of FromEnv.
const (
	// EnvAuth is "iam" to authenticate with IAM; empty: the URL's own.
	EnvAuth = "VALKEY_AUTH"
	// EnvUser is the ElastiCache user id (which IAM authentication wants
	// equal to its name).
	EnvUser = "VALKEY_USER"
	// EnvCacheName is the cache's name (the serverless cache or the
	// replication group), which the token is signed for.
	EnvCacheName = "VALKEY_CACHE_NAME"
	// EnvServerless is "false" for a replication group; default a
	// serverless cache.
	EnvServerless = "VALKEY_SERVERLESS"
)

// Lifetime is how long ElastiCache accepts a token; Refresh is when a
// TokenSource signs a new one, well before.
const (
	Lifetime = 15 * time.Minute
	Refresh  = 10 * time.Minute
)

// service is the SigV4 signing name of ElastiCache.
const service = "elasticache"

// emptyPayloadHash is the SHA-256 of the empty body of the presigned GET.
const emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// TokenSource makes the IAM auth tokens of one user of one cache. It is
// safe for concurrent use.
type TokenSource struct {
	Credentials aws.CredentialsProvider
	Region      string
	CacheName   string
	UserID      string
	// Serverless marks a serverless cache (ResourceType=ServerlessCache in
	// the token); false: a replication group.
	Serverless bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu    sync.Mutex
	token string
	made  time.Time
}

// Token signs a new token: the host-less form of a presigned
// GET http://<cache>/?Action=connect&User=<user>[&ResourceType=ServerlessCache],
// as ElastiCache reads it from AUTH.
func (s *TokenSource) Token(ctx context.Context) (string, error) {
	creds, err := s.Credentials.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("valkey IAM token: credentials: %w", err)
	}
	q := url.Values{"Action": {"connect"}, "User": {s.UserID}, "X-Amz-Expires": {fmt.Sprint(int(Lifetime / time.Second))}}
	if s.Serverless {
		q.Set("ResourceType", "ServerlessCache")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.CacheName+"/?"+q.Encode(), nil)
	if err != nil {
		return "", fmt.Errorf("valkey IAM token: %w", err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, creds, req, emptyPayloadHash, service, s.Region, s.now())
	if err != nil {
		return "", fmt.Errorf("valkey IAM token: sign: %w", err)
	}
	return strings.TrimPrefix(signed, "http://"), nil
}

// Auth is the user and password of a new connection: the user id and a
// token signed at most Refresh ago (go-redis asks at each connection).
func (s *TokenSource) Auth(ctx context.Context) (username, password string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); s.token == "" || now.Sub(s.made) >= Refresh || now.Before(s.made) {
		tok, err := s.Token(ctx)
		if err != nil {
			return "", "", err
		}
		s.token, s.made = tok, now
	}
	return s.UserID, s.token, nil
}

func (s *TokenSource) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// FromEnv returns the client options of the environment: with
// VALKEY_AUTH=iam, connections authenticate as VALKEY_USER with tokens for
// VALKEY_CACHE_NAME, signed with the default AWS credentials in AWS_REGION;
// otherwise none (the URL's user and password, if any).
func FromEnv(ctx context.Context, getenv func(string) string) ([]valkey.ClientOption, error) {
	switch strings.ToLower(strings.TrimSpace(getenv(EnvAuth))) {
	case "":
		return nil, nil
	case "iam":
	default:
		return nil, fmt.Errorf("%s=%q: want iam or nothing", EnvAuth, getenv(EnvAuth))
	}
	src := &TokenSource{UserID: getenv(EnvUser), CacheName: getenv(EnvCacheName), Serverless: getenv(EnvServerless) != "false"}
	if src.UserID == "" || src.CacheName == "" {
		return nil, fmt.Errorf("%s=iam needs %s and %s", EnvAuth, EnvUser, EnvCacheName)
	}
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
	if err != nil {
		return nil, fmt.Errorf("valkey IAM auth: AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("valkey IAM auth: no AWS region (AWS_REGION)")
	}
	src.Credentials, src.Region = cfg.Credentials, cfg.Region
	return []valkey.ClientOption{valkey.WithCredentials(src.Auth)}, nil
}
