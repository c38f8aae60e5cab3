// Package llmconfig chooses and builds the llm.Provider from environment
// variables, for the Lambda mains and the local stack. It lives apart from
// pkg/llm so that package stays free of provider imports (no import cycle).
// It must not read the environment itself: callers pass getenv.
package llmconfig

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/openai"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
)

// DefaultOpenAIModel is the model id used for openai when CLIENTAGENT_MODEL is unset.
const DefaultOpenAIModel = "gpt-4o-mini"

// FromEnv builds the provider the environment asks for and a one-line
// description of it for logs and banners (never a key):
//
//	CLIENTAGENT_LLM              openai | bedrock | scripted; default openai when
//	                             OPENAI_BASE_URL is set, else scripted (the offline demo model)
//	CLIENTAGENT_MODEL            model id of the medium flavour (openai default gpt-4o-mini;
//	                             required for bedrock)
//	CLIENTAGENT_MODEL_SMALL, CLIENTAGENT_MODEL_LARGE   optional model ids of the other flavours
//	OPENAI_BASE_URL, OPENAI_API_KEY                    the OpenAI-compatible endpoint
//	OPENAI_API_KEY_SECRET_ARN    when OPENAI_API_KEY is empty: a Secrets Manager secret holding
//	                             the key, read once here (at cold start; see ReadOpenAIKey)
//	CLIENTAGENT_LLM_TIMEOUT      deadline of one attempt (Go duration, default 90s)
//	CLIENTAGENT_LLM_MAX_ATTEMPTS attempts per call including retries (default 4)
//	CLIENTAGENT_BEDROCK_PROMPT_CACHE  on | off | auto (default): whether Bedrock requests
//	                             carry cache points; auto places them for the models
//	                             known to support prompt caching (Claude 3.7 Sonnet,
//	                             3.5 Haiku, the Claude 4 families, Amazon Nova)
//
// Bedrock takes its region and credentials from the usual AWS variables
// (AWS_REGION, the Lambda role, …). OpenAI-compatible endpoints get the
// conversation as prompt_cache_key where they accept it; there is nothing
// to configure.
func FromEnv(getenv func(string) string) (llm.Provider, string, error) {
	return FromEnvContext(context.Background(), getenv)
}

// FromEnvContext is FromEnv with a context for the one outbound call it may
// make (reading OPENAI_API_KEY_SECRET_ARN, itself bounded by a deadline).
func FromEnvContext(ctx context.Context, getenv func(string) string) (llm.Provider, string, error) {
	kind := strings.ToLower(strings.TrimSpace(getenv("CLIENTAGENT_LLM")))
	if kind == "" {
		kind = "scripted"
		if getenv("OPENAI_BASE_URL") != "" {
			kind = "openai"
		}
	}
	timeout, attempts, err := limits(getenv)
	if err != nil {
		return nil, "", err
	}
	model := strings.TrimSpace(getenv("CLIENTAGENT_MODEL"))
	flavours := map[llm.Flavour]string{}
	for f, key := range map[llm.Flavour]string{llm.Small: "CLIENTAGENT_MODEL_SMALL", llm.Large: "CLIENTAGENT_MODEL_LARGE"} {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			flavours[f] = v
		}
	}
	switch kind {
	case "scripted", "demo":
		return scripted.Demo(), "scripted demo model (offline; set OPENAI_BASE_URL or CLIENTAGENT_LLM=bedrock for a real one)", nil
	case "openai":
		if model == "" {
			model = DefaultOpenAIModel
		}
		key, err := openAIKey(ctx, getenv)
		if err != nil {
			return nil, "", fmt.Errorf("llm config: %w", err)
		}
		base := getenv("OPENAI_BASE_URL")
		p := openai.New(openai.Config{
			BaseURL:       base,
			APIKey:        key,
			Model:         model,
			FlavourModels: flavours,
			MaxAttempts:   attempts,
			Timeout:       timeout,
		})
		if base == "" {
			base = "api.openai.com"
		}
		return p, fmt.Sprintf("openai-compatible %s at %s", model, base), nil
	case "bedrock":
		if model == "" {
			return nil, "", fmt.Errorf("llm config: CLIENTAGENT_LLM=bedrock needs CLIENTAGENT_MODEL (a Bedrock model or inference profile id)")
		}
		cache, err := bedrockPromptCache(getenv)
		if err != nil {
			return nil, "", err
		}
		return newBedrock(model, flavours, attempts, timeout, cache)
	default:
		return nil, "", fmt.Errorf("llm config: CLIENTAGENT_LLM=%q: want openai, bedrock or scripted", kind)
	}
}

func limits(getenv func(string) string) (time.Duration, int, error) {
	var timeout time.Duration
	if v := getenv("CLIENTAGENT_LLM_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, 0, fmt.Errorf("llm config: CLIENTAGENT_LLM_TIMEOUT=%q: want a positive Go duration like 90s", v)
		}
		timeout = d
	}
	var attempts int
	if v := getenv("CLIENTAGENT_LLM_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return 0, 0, fmt.Errorf("llm config: CLIENTAGENT_LLM_MAX_ATTEMPTS=%q: want a positive integer", v)
		}
		attempts = n
	}
	return timeout, attempts, nil
}
