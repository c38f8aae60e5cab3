package awssecrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/clientagent/clientagent/pkg/awssign"
)

// Client makes Secrets Manager's GetSecretValue call itself: the AWS JSON
// 1.1 protocol (POST /, X-Amz-Target: secretsmanager.GetSecretValue),
// signed with SigV4 and sent by pkg/awssign, which tries a throttled,
// failed (5xx) or unreachable attempt again. It is the only call the
// platform makes to Secrets Manager, and the SDK's client costs every
// function that links it its package initialisers at each cold start.
type Client struct{ awssign.Service }

// NewClient is the Client of cfg: its region and credentials, its
// AWS_ENDPOINT_URL_SECRETS_MANAGER or AWS_ENDPOINT_URL, its attempts.
func NewClient(cfg aws.Config) *Client {
	return &Client{awssign.ServiceOf(cfg, "secretsmanager", "secretsmanager", "SECRETS_MANAGER")}
}

var _ API = (*Client)(nil)

// SecretValue is GetSecretValue of secret id in region ("": the client's):
// its SecretString, nil when it has none (a binary secret). An error names
// the service's error code and message, which never hold the secret's
// value.
func (c *Client) SecretValue(ctx context.Context, id, region string) (*string, error) {
	if region == "" && c.Region == "" {
		return nil, errors.New("secretsmanager GetSecretValue: no region (set AWS_REGION, or name the secret by ARN)")
	}
	body, err := json.Marshal(map[string]string{"SecretId": id})
	if err != nil {
		return nil, err
	}
	build := func(ctx context.Context, base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "secretsmanager.GetSecretValue")
		return req, nil
	}
	a, err := c.Send(ctx, region, build, func(a awssign.Answer) bool {
		code, _ := a.ServiceError()
		return code == "ThrottlingException" || code == "RequestLimitExceeded"
	})
	if err != nil {
		return nil, fmt.Errorf("secretsmanager GetSecretValue: %w", err)
	}
	if a.Status != http.StatusOK {
		code, msg := a.ServiceError()
		return nil, fmt.Errorf("secretsmanager GetSecretValue: %s: %s", code, msg)
	}
	var out struct{ SecretString *string }
	if err := json.Unmarshal(a.Body, &out); err != nil {
		return nil, fmt.Errorf("secretsmanager GetSecretValue: the answer is not JSON: %w", err)
	}
	return out.SecretString, nil
}
