package awssecrets_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/awssecrets"
	"github.com/clientagent/clientagent/pkg/mcp"
)

const otherRegionARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:docs-mcp-AbCdEf"

// fakeAPI holds secret strings by id (nil: a binary secret) and records
// each call's id and the region its options ask for.
type fakeAPI struct {
	secrets map[string]*string

	mu    sync.Mutex
	calls []string // "<id>@<region>"
}

var _ awssecrets.API = (*fakeAPI)(nil)

func (f *fakeAPI) SecretValue(ctx context.Context, id, region string) (*string, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("no deadline")
	}
	if region == "" {
		region = "us-east-1" // the client's
	}
	f.mu.Lock()
	f.calls = append(f.calls, id+"@"+region)
	f.mu.Unlock()
	s, ok := f.secrets[id]
	if !ok {
		return nil, errors.New("ResourceNotFoundException: Secrets Manager can't find the specified secret")
	}
	return s, nil
}

var _ mcp.Secrets = (*awssecrets.Reader)(nil)

func TestReaderSecretString(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{secrets: map[string]*string{
		"plain":        aws.String("  Bearer plain-token\n"),
		"json":         aws.String(`{"token":" Bearer json-token ","n":1,"empty":""}`),
		"not-json":     aws.String(`{"token": broken`),
		"empty":        aws.String(" "),
		"binary":       nil,
		otherRegionARN: aws.String("Bearer from-eu"),
	}}
	r := awssecrets.NewReader(api)
	tests := []struct {
		id, want, wantErr string
		noValue           bool // errors.Is ErrNoValue
	}{
		{id: "plain", want: "Bearer plain-token"},
		{id: " plain ", want: "Bearer plain-token"},
		{id: "json#token", want: "Bearer json-token"},
		{id: otherRegionARN, want: "Bearer from-eu"},
		{id: "json", wantErr: "holds a JSON object; name its field", noValue: true},
		{id: "json#missing", wantErr: `no non-empty string field "missing"`, noValue: true},
		{id: "json#n", wantErr: `no non-empty string field "n"`, noValue: true},
		{id: "json#empty", wantErr: `no non-empty string field "empty"`, noValue: true},
		{id: "plain#token", wantErr: "not a JSON object", noValue: true},
		{id: "not-json", want: `{"token": broken`},
		{id: "empty", wantErr: "empty secret string", noValue: true},
		{id: "binary", wantErr: "binary secrets are not read", noValue: true},
		{id: "json#", wantErr: "want <arn-or-name> or <arn-or-name>#<field>"},
		{id: "#token", wantErr: "want <arn-or-name> or <arn-or-name>#<field>"},
		{id: "gone", wantErr: "ResourceNotFoundException"},
	}
	for _, tt := range tests {
		got, err := r.SecretString(t.Context(), tt.id)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("SecretString(%q) = %q, %v, want %q", tt.id, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("SecretString(%q) = %q, %v, want an error containing %q", tt.id, got, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "-token") {
			t.Errorf("SecretString(%q) error %q holds the secret's value", tt.id, err)
		}
		if tt.noValue && !errors.Is(err, awssecrets.ErrNoValue) {
			t.Errorf("SecretString(%q) error = %v, want errors.Is ErrNoValue", tt.id, err)
		}
	}
	// Each secret is read once, whatever the fields asked of it, in its
	// ARN's region; a failed read is tried again.
	if _, err := r.SecretString(t.Context(), "gone"); err == nil {
		t.Errorf("SecretString(gone) a second time: no error")
	}
	want := []string{"plain@us-east-1", "json@us-east-1", otherRegionARN + "@eu-west-1", "not-json@us-east-1",
		"empty@us-east-1", "binary@us-east-1", "gone@us-east-1", "gone@us-east-1"}
	if diff := cmp.Diff(want, api.calls); diff != "" {
		t.Errorf("GetSecretValue calls (-want +got):\n%s", diff)
	}
}

// mcp.Resolve with a Reader fills the headers and names the secret, never
// its value, when one cannot be read.
func TestResolveWithReader(t *testing.T) {
	t.Parallel()
	r := awssecrets.NewReader(&fakeAPI{secrets: map[string]*string{"docs": aws.String(`{"token":"Bearer t0k"}`)}})
	servers := []mcp.ServerConfig{{Name: "docs", URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "secret:docs#token", "X-Team": "a"}}}
	got, err := mcp.Resolve(t.Context(), servers, r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"Authorization": "Bearer t0k", "X-Team": "a"}, got[0].Headers); diff != "" {
		t.Errorf("Resolve() headers (-want +got):\n%s", diff)
	}
	servers[0].Headers["Authorization"] = "secret:docs"
	_, err = mcp.Resolve(t.Context(), servers, r)
	if err == nil || !strings.Contains(err.Error(), "secret docs") || strings.Contains(err.Error(), "t0k") {
		t.Errorf("Resolve(JSON secret without a field) error = %v, want one naming the secret, not its value", err)
	}
}
