package llmconfig

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/bedrock"
)

// newBedrock builds the Converse provider with the default AWS credential
// chain (the Lambda role, AWS_PROFILE, …). The SDK's standard retryer
// handles throttling and 5xx, bounded by attempts.
func newBedrock(model string, flavours map[llm.Flavour]string, attempts int, timeout time.Duration) (llm.Provider, string, error) {
	if attempts <= 0 {
		attempts = 4
	}
	// Loading the config only reads the environment and shared files; the
	// credentials are fetched lazily on the first call.
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRetryMaxAttempts(attempts))
	if err != nil {
		return nil, "", fmt.Errorf("llm config: load AWS config for bedrock: %w", err)
	}
	if cfg.Region == "" {
		return nil, "", fmt.Errorf("llm config: CLIENTAGENT_LLM=bedrock needs an AWS region (AWS_REGION)")
	}
	p := bedrock.New(bedrockruntime.NewFromConfig(cfg), bedrock.Config{Model: model, FlavourModels: flavours, Timeout: timeout})
	return p, fmt.Sprintf("bedrock %s in %s", model, cfg.Region), nil
}
