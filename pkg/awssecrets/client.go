package awssecrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/clientagent/clientagent/pkg/awssign"
)

// Client makes Secrets Manager's GetSecretValue call itself: the AWS JSON
// 1.1 protocol (POST /, X-Amz-Target: secretsmanager.GetSecretValue),
// signed with SigV4 and sent by pkg/awssign. It is the only call the
// platform makes to Secrets Manager, and the SDK's client costs every
// function that links it its package initialisers (endpoint tables and
// schemas) at each cold start. A throttled, failed (5xx) or unreachable
// attempt is tried again, up to MaxAttempts (awssign.Send).
type Client struct {
	Credentials aws.CredentialsProvider
	// Region is the region of a secret named without one (by name).
	Region string
	// Endpoint, when set, is the base URL of every request
	// (AWS_ENDPOINT_URL_SECRETS_MANAGER: tests, local emulators); else
	// https://secretsmanager.<region>.amazonaws.com.
	Endpoint string
	// HTTP carries the requests (nil: a client over keepalive.Transport).
	HTTP *http.Client
	// MaxAttempts bounds the attempts of one read (0: 3).
	MaxAttempts int
}

// NewClient is the Client of cfg: its region and credentials, its
// AWS_ENDPOINT_URL_SECRETS_MANAGER or AWS_ENDPOINT_URL, its attempts.
func NewClient(cfg aws.Config) *Client {
	c := &Client{Credentials: cfg.Credentials, Region: cfg.Region, MaxAttempts: cfg.RetryMaxAttempts}
	if e := os.Getenv("AWS_ENDPOINT_URL_SECRETS_MANAGER"); e != "" {
		c.Endpoint = e
	} else if cfg.BaseEndpoint != nil {
		c.Endpoint = *cfg.BaseEndpoint
	}
	return c
}

var _ API = (*Client)(nil)

// SecretValue is GetSecretValue of secret id in region ("": c.Region): its
// SecretString, nil when it has none (a binary secret). An error names the
// service's error code and message, which never hold the secret's value.
func (c *Client) SecretValue(ctx context.Context, id, region string) (*string, error) {
	if region == "" {
		region = c.Region
	}
	if region == "" {
		return nil, errors.New("secretsmanager GetSecretValue: no region (set AWS_REGION, or name the secret by ARN)")
	}
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = "https://secretsmanager." + region + ".amazonaws.com"
	}
	body, err := json.Marshal(map[string]string{"SecretId": id})
	if err != nil {
		return nil, err
	}
	build := func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(endpoint, "/")+"/", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "secretsmanager.GetSecretValue")
		return req, nil
	}
	a, err := awssign.Send(ctx, awssign.Client(c.HTTP, c.Credentials, region, "secretsmanager"), build, c.MaxAttempts, func(a awssign.Answer) bool {
		code, _ := errorOf(a)
		return code == "ThrottlingException" || code == "RequestLimitExceeded"
	})
	if err != nil {
		return nil, fmt.Errorf("secretsmanager GetSecretValue: %w", err)
	}
	if a.Status != http.StatusOK {
		code, msg := errorOf(a)
		return nil, fmt.Errorf("secretsmanager GetSecretValue: %s: %s", code, msg)
	}
	var out struct{ SecretString *string }
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return nil, fmt.Errorf("secretsmanager GetSecretValue: the answer is not JSON: %w", err)
	}
	return out.SecretString, nil
}

// errorOf is the error code and message of a JSON 1.1 error answer.
func errorOf(a awssign.Answer) (code, msg string) {
	var e struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(a.Body, &e)
	code = e.Type[strings.LastIndexByte(e.Type, '#')+1:]
	if code == "" {
		code = strconv.Itoa(a.Status) + " " + http.StatusText(a.Status)
	}
	return code, e.Message + e.MessageU
}
