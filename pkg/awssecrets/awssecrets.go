// Package awssecrets reads secret strings from AWS Secrets Manager: the
// OpenAI-compatible key of pkg/llm/llmconfig and the "secret:" header
// values of MCP servers (Reader, an mcp.Secrets). It makes one call,
// GetSecretValue, with a deadline, in the secret's own region when it is
// named by ARN, through its own Client (no SDK service client). It must
// not log or return a secret's value in an error.
package awssecrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Timeout bounds one read, retries included: a function that cannot reach
// Secrets Manager should fail its cold start quickly and say why, not hang
// until its own timeout.
const Timeout = 15 * time.Second

// FieldSeparator separates a secret's id from the field of the JSON object
// it holds, in a Reader's ids: "<arn-or-name>#<field>". Neither an ARN nor
// a secret's name may contain it.
const FieldSeparator = "#"

// ErrNoValue means the secret exists but holds no usable string: empty,
// binary only, a JSON object without the field asked for, or a JSON object
// where a plain string was expected.
var ErrNoValue = errors.New("secret holds no usable value")

// API is the one Secrets Manager call this package makes (Client makes
// it): GetSecretValue of secret id in region ("": the client's), its
// SecretString, nil for a binary secret.
type API interface {
	SecretValue(ctx context.Context, id, region string) (*string, error)
}

// Read returns the string of secret id (an ARN or a name), as stored. A
// secret named by ARN is read in the ARN's region, whatever the client's.
func Read(ctx context.Context, api API, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	s, err := api.SecretValue(ctx, id, arnRegion(id))
	if err != nil {
		return "", err
	}
	if s == nil {
		return "", fmt.Errorf("%w (no secret string: binary secrets are not read)", ErrNoValue)
	}
	return *s, nil
}

// arnRegion is the region of arn:<partition>:secretsmanager:<region>:…, or
// "" for a name.
func arnRegion(id string) string {
	parts := strings.SplitN(id, ":", 5)
	if len(parts) < 5 || parts[0] != "arn" || parts[2] != "secretsmanager" {
		return ""
	}
	return parts[3]
}

// Reader reads secrets by id for the life of the process (a Lambda
// function's cold start reads each once): an id is "<arn-or-name>", whose
// string is the value, or "<arn-or-name>#<field>", the string field of the
// JSON object the secret holds. A JSON object named without a field is an
// error (ErrNoValue) rather than a header holding JSON. Values are trimmed.
// A failed read is not remembered. It is safe for concurrent use.
type Reader struct {
	api API

	mu      sync.Mutex
	strings map[string]string // secret id → its string
}

// NewReader is a Reader over api.
func NewReader(api API) *Reader {
	return &Reader{api: api, strings: map[string]string{}}
}

// SecretString returns the value id names (mcp.Secrets). The error says
// why, never the secret's content, and leaves naming id to the caller
// (mcp.Resolve names the server, the header and the secret).
func (r *Reader) SecretString(ctx context.Context, id string) (string, error) {
	secretID, field, hasField := strings.Cut(strings.TrimSpace(id), FieldSeparator)
	if secretID == "" || hasField && field == "" {
		return "", fmt.Errorf("secret %q: want <arn-or-name> or <arn-or-name>%s<field>", id, FieldSeparator)
	}
	s, err := r.read(ctx, secretID)
	if err != nil {
		return "", err
	}
	return value(s, field)
}

func (r *Reader) read(ctx context.Context, id string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.strings[id]; ok {
		return s, nil
	}
	s, err := Read(ctx, r.api, id)
	if err != nil {
		return "", err
	}
	r.strings[id] = s
	return s, nil
}

// value is the trimmed secret string s, or its JSON object's field.
func value(s, field string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w (empty secret string; set it with aws secretsmanager put-secret-value)", ErrNoValue)
	}
	var fields map[string]any
	isObject := strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &fields) == nil
	switch {
	case field == "" && isObject:
		return "", fmt.Errorf("%w: the secret holds a JSON object; name its field, <arn-or-name>%s<field>", ErrNoValue, FieldSeparator)
	case field == "":
		return s, nil
	case !isObject:
		return "", fmt.Errorf("%w: field %q asked for, but the secret string is not a JSON object", ErrNoValue, field)
	}
	v, ok := fields[field].(string)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%w: the JSON object has no non-empty string field %q", ErrNoValue, field)
	}
	return strings.TrimSpace(v), nil
}
