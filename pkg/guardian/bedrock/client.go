package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/clientagent/clientagent/pkg/awssign"
)

// Client makes Bedrock's ApplyGuardrail call itself: the REST-JSON
// protocol (POST /guardrail/{id}/version/{version}/apply), signed with
// SigV4 for the service "bedrock" and sent by pkg/awssign, which tries a
// throttled, failed (5xx) or unreachable attempt again. The SDK's Bedrock
// runtime client would cost the functions that check (validate, append)
// its package initialisers at every cold start.
type Client struct {
	Credentials aws.CredentialsProvider
	Region      string
	// Endpoint, when set, is the base URL of every request
	// (AWS_ENDPOINT_URL_BEDROCK_RUNTIME: tests); else
	// https://bedrock-runtime.<region>.amazonaws.com.
	Endpoint string
	// HTTP carries the requests (nil: a client over keepalive.Transport).
	HTTP *http.Client
	// MaxAttempts bounds the attempts of one check (0: 3).
	MaxAttempts int
}

// NewClient is the Client of cfg: its region and credentials, its
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME or AWS_ENDPOINT_URL, its attempts.
func NewClient(cfg aws.Config) *Client {
	c := &Client{Credentials: cfg.Credentials, Region: cfg.Region, MaxAttempts: cfg.RetryMaxAttempts}
	if e := os.Getenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME"); e != "" {
		c.Endpoint = e
	} else if cfg.BaseEndpoint != nil {
		c.Endpoint = *cfg.BaseEndpoint
	}
	return c
}

var _ API = (*Client)(nil)

// ApplyGuardrail applies guardrail id at version to text from source. An
// error names the service's error type and message.
func (c *Client) ApplyGuardrail(ctx context.Context, id, version, source, text string) (*Result, error) {
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = "https://bedrock-runtime." + c.Region + ".amazonaws.com"
	}
	body, err := json.Marshal(map[string]any{"source": source,
		"content": []any{map[string]any{"text": map[string]string{"text": text}}}})
	if err != nil {
		return nil, err
	}
	target := strings.TrimSuffix(endpoint, "/") + "/guardrail/" + url.PathEscape(id) + "/version/" + url.PathEscape(version) + "/apply"
	build := func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	}
	a, err := awssign.Send(ctx, awssign.Client(c.HTTP, c.Credentials, c.Region, "bedrock"), build, c.MaxAttempts,
		func(a awssign.Answer) bool { return errorType(a) == "ThrottlingException" })
	if err != nil {
		return nil, fmt.Errorf("ApplyGuardrail: %w", err)
	}
	if a.Status != http.StatusOK {
		var e struct {
			Message  string `json:"message"`
			MessageU string `json:"Message"`
		}
		_ = json.Unmarshal(a.Body, &e)
		return nil, fmt.Errorf("ApplyGuardrail: %s: %s", errorType(a), e.Message+e.MessageU)
	}
	var out Result
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return nil, fmt.Errorf("ApplyGuardrail: the answer is not JSON: %w", err)
	}
	return &out, nil
}

// errorType is a REST-JSON error answer's type (X-Amzn-ErrorType, before
// its ':'), or its HTTP status.
func errorType(a awssign.Answer) string {
	t, _, _ := strings.Cut(a.Header.Get("X-Amzn-ErrorType"), ":")
	if t == "" {
		return strconv.Itoa(a.Status) + " " + http.StatusText(a.Status)
	}
	return t
}
