// Package awsenv wires the platform's S3 pieces for a Lambda function, from
// its environment: the artifact store and the audit log. Only the functions
// that use them import it (pkg/platform.Env has the rest), and it builds no
// other AWS client.
//
//	ARTIFACT_BUCKET  the S3 bucket of artifacts (required by Artifacts)
//	ARTIFACT_PREFIX  a key prefix in it (optional)
//	AUDIT_BUCKET     the S3 bucket of the audit log (versioned, never expires); unset: no audit log
//
// Region and credentials come from the usual AWS variables (the Lambda
// role); AWS_ENDPOINT_URL_S3 points S3 elsewhere (tests).
package awsenv

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/clientagent/clientagent/pkg/artifact/s3store"
	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/audit/s3audit"
	"github.com/clientagent/clientagent/pkg/awsconfig"
)

// AWS is the function's AWS configuration and its S3 client.
type AWS struct {
	Config aws.Config
	S3     *s3.Client
}

// Load reads the AWS configuration of the environment (no request is made).
func Load(ctx context.Context) (*AWS, error) {
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	return &AWS{Config: cfg, S3: s3.NewFromConfig(cfg)}, nil
}

// Artifacts is the artifact store in ARTIFACT_BUCKET under ARTIFACT_PREFIX.
func (a *AWS) Artifacts(getenv func(string) string) (*s3store.Store, error) {
	bucket := getenv("ARTIFACT_BUCKET")
	if bucket == "" {
		return nil, fmt.Errorf("ARTIFACT_BUCKET must be set")
	}
	return s3store.New(a.S3, bucket, getenv("ARTIFACT_PREFIX")), nil
}

// Audit is the audit log in AUDIT_BUCKET, or nil (none) when it is unset.
func (a *AWS) Audit(getenv func(string) string) audit.Log {
	b := getenv("AUDIT_BUCKET")
	if b == "" {
		return nil
	}
	return s3audit.Log{API: a.S3, Bucket: b}
}
