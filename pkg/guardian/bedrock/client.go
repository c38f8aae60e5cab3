package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/clientagent/clientagent/pkg/awssign"
)

// Client makes Bedrock's ApplyGuardrail call itself: the REST-JSON
// protocol (POST /guardrail/{id}/version/{version}/apply), signed with
// SigV4 for the service "bedrock" and sent by pkg/awssign, which tries a
// throttled, failed (5xx) or unreachable attempt again. The SDK's Bedrock
// runtime client would cost the functions that check (validate, append)
// its package initialisers at every cold start.
type Client struct{ awssign.Service }

// NewClient is the Client of cfg: its region and credentials, its
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME or AWS_ENDPOINT_URL, its attempts.
func NewClient(cfg aws.Config) *Client {
	return &Client{awssign.ServiceOf(cfg, "bedrock", "bedrock-runtime", "BEDROCK_RUNTIME")}
}

var _ API = (*Client)(nil)

// ApplyGuardrail applies guardrail id at version to text from source. An
// error names the service's error type and message.
func (c *Client) ApplyGuardrail(ctx context.Context, id, version, source, text string) (*Result, error) {
	body, err := json.Marshal(map[string]any{"source": source,
		"content": []any{map[string]any{"text": map[string]string{"text": text}}}})
	if err != nil {
		return nil, err
	}
	path := "/guardrail/" + url.PathEscape(id) + "/version/" + url.PathEscape(version) + "/apply"
	build := func(ctx context.Context, base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	}
	a, err := c.Send(ctx, "", build, func(a awssign.Answer) bool {
		code, _ := a.ServiceError()
		return code == "ThrottlingException"
	})
	if err != nil {
		return nil, fmt.Errorf("ApplyGuardrail: %w", err)
	}
	if a.Status != http.StatusOK {
		code, msg := a.ServiceError()
		return nil, fmt.Errorf("ApplyGuardrail: %s: %s", code, msg)
	}
	var out Result
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return nil, fmt.Errorf("ApplyGuardrail: the answer is not JSON: %w", err)
	}
	return &out, nil
}
