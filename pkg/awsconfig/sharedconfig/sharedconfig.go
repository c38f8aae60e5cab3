// Package sharedconfig makes awsconfig.Load use the AWS SDK's default
// configuration chain: shared config and credentials files, profiles,
// SSO, web identity, the container and instance endpoints. The clientagent
// command uses it (a person's profiles); the Lambda functions do not link
// it (awsconfig).
package sharedconfig

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/clientagent/clientagent/pkg/awsconfig"
)

// Use makes awsconfig.Load read the SDK's default chain.
func Use() { awsconfig.Use(Load) }

// Load is the SDK's default configuration with the options applied.
func Load(ctx context.Context, o awsconfig.Options) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.MaxAttempts > 0 {
		opts = append(opts, config.WithRetryMaxAttempts(o.MaxAttempts))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}
