package awssecrets_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/clientagent/clientagent/pkg/awssecrets"
)

// The client speaks Secrets Manager's JSON protocol, signed for the
// secret's region; it tries a throttled or failing (5xx) read again, up to
// its attempts, and not a refused one; a binary secret has no string; an
// error names the code and the service's message, never a value.
func TestClientGetSecretValue(t *testing.T) {
	t.Parallel()
	var calls, failFirst atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		var in struct{ SecretId string }
		_ = json.Unmarshal(body, &in)
		auth := r.Header.Get("Authorization")
		if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
			r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || !strings.Contains(auth, "Credential=AKIDTEST/") {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"UnknownOperationException","message":"unexpected request"}`)
			return
		}
		region := "us-east-1"
		if strings.Contains(auth, "/eu-west-1/secretsmanager/") {
			region = "eu-west-1"
		}
		switch in.SecretId {
		case "flaky":
			if failFirst.Add(1) <= 2 {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"__type":"com.amazonaws.secretsmanager#ThrottlingException","message":"Rate exceeded"}`)
				return
			}
		case "down":
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case "binary":
			io.WriteString(w, `{"ARN":"x","SecretBinary":"AAEC"}`)
			return
		case "gone":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"ARN": in.SecretId, "SecretString": "value-of-" + in.SecretId + "@" + region})
	}))
	defer srv.Close()
	c := awssecrets.NewClient(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", "")})

	get := func(id, region string) (*string, int32, error) {
		before := calls.Load()
		s, err := c.SecretValue(t.Context(), id, region)
		return s, calls.Load() - before, err
	}
	if s, n, err := get("plain", ""); err != nil || s == nil || *s != "value-of-plain@us-east-1" || n != 1 {
		t.Errorf("plain: %v, %v, %d requests", s, err, n)
	}
	if s, n, err := get("plain", "eu-west-1"); err != nil || s == nil || *s != "value-of-plain@eu-west-1" || n != 1 {
		t.Errorf("in eu-west-1: %v, %v, %d requests", s, err, n)
	}
	if s, n, err := get("flaky", ""); err != nil || s == nil || n != 3 {
		t.Errorf("throttled twice: %v, %v, %d requests; want the value at the third", s, err, n)
	}
	if _, n, err := get("down", ""); err == nil || !strings.Contains(err.Error(), "503") || n != 3 {
		t.Errorf("down: %v, %d requests; want an error after 3", err, n)
	}
	if _, n, err := get("gone", ""); err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException: Secrets Manager can't find") || n != 1 {
		t.Errorf("gone: %v, %d requests; want the code and message, once", err, n)
	}
	if s, _, err := get("binary", ""); err != nil || s != nil {
		t.Errorf("binary: %v, %v; want no string", s, err)
	}
	if _, err := awssecrets.NewClient(aws.Config{Credentials: c.Credentials}).SecretValue(t.Context(), "plain", ""); err == nil || !strings.Contains(err.Error(), "no region") {
		t.Errorf("no region: %v", err)
	}
}
