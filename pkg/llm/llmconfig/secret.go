package llmconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/awssecrets"
)

// ErrNoKeyInSecret means the secret exists but holds no usable key (empty,
// binary, or a JSON object without api_key / OPENAI_API_KEY).
var ErrNoKeyInSecret = errors.New("secret holds no API key")

// SecretGetter is the Secrets Manager call ReadOpenAIKey makes
// (*awssecrets.Client makes it).
type SecretGetter = awssecrets.API

// ReadOpenAIKey reads the OpenAI-compatible API key from the secret arn
// (an ARN or name). The secret string is either the key itself or a JSON
// object with an "api_key" or "OPENAI_API_KEY" field, the two shapes people
// store. The key never appears in the error. The read is bounded by
// awssecrets.Timeout and made in the ARN's region (awssecrets.Read).
func ReadOpenAIKey(ctx context.Context, sm SecretGetter, arn string) (string, error) {
	s, err := awssecrets.Read(ctx, sm, arn)
	if errors.Is(err, awssecrets.ErrNoValue) {
		s, err = "", nil // a binary secret: keyFromSecretString says what is wrong
	}
	if err != nil {
		return "", fmt.Errorf("read OpenAI key from secret %s: %w", arn, err)
	}
	key, err := keyFromSecretString(s)
	if err != nil {
		return "", fmt.Errorf("read OpenAI key from secret %s: %w", arn, err)
	}
	return key, nil
}

func keyFromSecretString(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w (empty secret string; set it with aws secretsmanager put-secret-value)", ErrNoKeyInSecret)
	}
	if !strings.HasPrefix(s, "{") {
		return s, nil
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(s), &fields); err != nil {
		return "", fmt.Errorf("%w: the secret string starts with '{' but is not a JSON object: %v", ErrNoKeyInSecret, err)
	}
	for _, name := range []string{"api_key", "OPENAI_API_KEY"} {
		if v, ok := fields[name].(string); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%w: the JSON object has no api_key or OPENAI_API_KEY string field", ErrNoKeyInSecret)
}

// openAIKey returns OPENAI_API_KEY, or, when it is empty and
// OPENAI_API_KEY_SECRET_ARN is set, the key read from that secret with the
// default AWS configuration (the Lambda role; AWS_ENDPOINT_URL_SECRETS_MANAGER
// is honoured, as by every SDK client). The deployed functions keep only the
// secret's ARN in their configuration, never the key.
func openAIKey(ctx context.Context, getenv func(string) string) (string, error) {
	if key := getenv("OPENAI_API_KEY"); key != "" {
		return key, nil
	}
	arn := strings.TrimSpace(getenv("OPENAI_API_KEY_SECRET_ARN"))
	if arn == "" {
		return "", nil
	}
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
	if err != nil {
		return "", fmt.Errorf("read OpenAI key from secret %s: load AWS config: %w", arn, err)
	}
	// With no region configured (outside Lambda), an ARN's region is the
	// one awssecrets.Read calls.
	return ReadOpenAIKey(ctx, awssecrets.NewClient(cfg), arn)
}
