package awsconfig_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/clientagent/clientagent/pkg/awsconfig"
)

// clearEnv unsets every variable Load reads, for this test.
func clearEnv(t *testing.T) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_S3", "AWS_MAX_ATTEMPTS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// A Lambda function's environment: its region, its role's credentials,
// and (in tests) a service's endpoint, which a real S3 client then uses.
func TestTheLambdaEnvironment(t *testing.T) {
	clearEnv(t)
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("AWS_REGION", "eu-west-3")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLAMBDA")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "session")
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	t.Setenv("AWS_MAX_ATTEMPTS", "2")
	cfg, err := awsconfig.Load(context.Background(), awsconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-3" || cfg.RetryMaxAttempts != 2 {
		t.Errorf("region %q, attempts %d; want eu-west-3, 2", cfg.Region, cfg.RetryMaxAttempts)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AKIDLAMBDA" || creds.SessionToken != "session" {
		t.Fatalf("credentials %+v, %v", creds, err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := client.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("b")}); err != nil {
		t.Fatalf("HeadBucket against AWS_ENDPOINT_URL_S3: %v", err)
	}
	if a, _ := auth.Load().(string); !strings.Contains(a, "Credential=AKIDLAMBDA/") || !strings.Contains(a, "/eu-west-3/s3/") {
		t.Errorf("the request was signed %q, want the role's key in eu-west-3", a)
	}
	// The options win over the environment.
	cfg, err = awsconfig.Load(context.Background(), awsconfig.Options{Region: "us-east-2", MaxAttempts: 5})
	if err != nil || cfg.Region != "us-east-2" || cfg.RetryMaxAttempts != 5 {
		t.Errorf("with options: region %q, attempts %d, %v", cfg.Region, cfg.RetryMaxAttempts, err)
	}
	t.Setenv("AWS_MAX_ATTEMPTS", "many")
	if _, err := awsconfig.Load(context.Background(), awsconfig.Options{}); err == nil {
		t.Error("AWS_MAX_ATTEMPTS=many loaded")
	}
}

// A container's credentials endpoint (ECS, EKS Pod Identity) is asked
// with its authorization token, and its credentials are kept until they
// are about to expire.
func TestAContainerCredentialsEndpoint(t *testing.T) {
	clearEnv(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token-from-file" {
			http.Error(w, `{"code":"denied","message":"bad token"}`, http.StatusForbidden)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		w.Write([]byte(`{"AccessKeyId":"AKIDCONTAINER","SecretAccessKey":"s","Token":"t","Expiration":"` + exp + `"}`))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("token-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/creds")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file)
	cfg, err := awsconfig.Load(context.Background(), awsconfig.Options{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		creds, err := cfg.Credentials.Retrieve(context.Background())
		if err != nil || creds.AccessKeyID != "AKIDCONTAINER" {
			t.Fatalf("credentials %+v, %v", creds, err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the endpoint was asked %d times for three retrievals, want once", n)
	}
}

// Without credentials in the environment, the first request that needs
// them fails and says where they were looked for; Use replaces the loader
// (the clientagent command's profiles).
func TestNoCredentialsAndAnotherLoader(t *testing.T) {
	clearEnv(t)
	cfg, err := awsconfig.Load(context.Background(), awsconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Credentials.Retrieve(context.Background()); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("Retrieve without credentials = %v, want an error naming the variables", err)
	}
	want := errors.New("from the other loader")
	awsconfig.Use(func(context.Context, awsconfig.Options) (aws.Config, error) { return aws.Config{}, want })
	defer awsconfig.Use(awsconfig.FromEnv)
	if _, err := awsconfig.Load(context.Background(), awsconfig.Options{}); !errors.Is(err, want) {
		t.Errorf("Load after Use = %v, want the other loader's error", err)
	}
}
