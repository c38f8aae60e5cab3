package llmconfig

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/bedrock"
)

// newBedrock builds the ConverseStream provider with the default AWS
// credential chain (the Lambda role, AWS_PROFILE, …). The client tries
// throttling and 5xx again before a stream starts, bounded by attempts;
// the provider calls again, as often, when a stream breaks midway.
func newBedrock(model string, flavours map[llm.Flavour]string, attempts int, timeout time.Duration, cache bedrock.PromptCache) (llm.Provider, string, error) {
	if attempts <= 0 {
		attempts = 4
	}
	// Loading the config only reads the environment and shared files; the
	// credentials are fetched lazily on the first call.
	cfg, err := awsconfig.Load(context.Background(), awsconfig.Options{MaxAttempts: attempts})
	if err != nil {
		return nil, "", fmt.Errorf("llm config: load AWS config for bedrock: %w", err)
	}
	if cfg.Region == "" {
		return nil, "", fmt.Errorf("llm config: CLIENTAGENT_LLM=bedrock needs an AWS region (AWS_REGION)")
	}
	p := bedrock.New(bedrock.NewClient(cfg), bedrock.Config{
		Model:         model,
		FlavourModels: flavours,
		PromptCache:   cache,
		MaxAttempts:   attempts,
		Timeout:       timeout,
	})
	return p, fmt.Sprintf("bedrock %s in %s", model, cfg.Region), nil
}

// bedrockPromptCache reads CLIENTAGENT_BEDROCK_PROMPT_CACHE: on, off or
// auto (the default: on for the models known to support prompt caching).
func bedrockPromptCache(getenv func(string) string) (bedrock.PromptCache, error) {
	v := strings.ToLower(strings.TrimSpace(getenv("CLIENTAGENT_BEDROCK_PROMPT_CACHE")))
	switch bedrock.PromptCache(v) {
	case "", bedrock.PromptCacheAuto:
		return bedrock.PromptCacheAuto, nil
	case bedrock.PromptCacheOn, bedrock.PromptCacheOff:
		return bedrock.PromptCache(v), nil
	}
	return "", fmt.Errorf("llm config: CLIENTAGENT_BEDROCK_PROMPT_CACHE=%q: want on, off or auto", v)
}
