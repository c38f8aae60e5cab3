package functions_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAWS answers the AWS calls the functions make, through the SDK's
// endpoint variables (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SFN,
// AWS_ENDPOINT_URL_SECRETS_MANAGER): S3 objects (PUT, GET, HEAD, DELETE,
// path-style, presigned GETs included), Step Functions' StartExecution,
// DescribeExecution and SendTaskSuccess, which it records, and Secrets
// Manager's GetSecretValue of the secrets it holds, which it counts.
type fakeAWS struct {
	srv *httptest.Server

	mu          sync.Mutex
	objects     map[string]object // bucket/key
	executions  []startExecution
	answers     []taskAnswer
	secrets     map[string]string // SecretId → SecretString
	secretReads map[string]int    // SecretId → GetSecretValue calls
}

type object struct {
	body        []byte
	contentType string
}

type startExecution struct {
	StateMachineArn string `json:"stateMachineArn"`
	Name            string `json:"name"`
	Input           string `json:"input"`
}

type taskAnswer struct {
	TaskToken string `json:"taskToken"`
	Output    string `json:"output"`
}

func newFakeAWS(tb testing.TB) *fakeAWS {
	a := &fakeAWS{objects: map[string]object{}, secrets: map[string]string{}, secretReads: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	tb.Cleanup(a.srv.Close)
	return a
}

// env points the SDK's S3, Step Functions and Secrets Manager clients at
// the fake.
func (a *fakeAWS) env() map[string]string {
	return map[string]string{"AWS_ENDPOINT_URL_S3": a.srv.URL, "AWS_ENDPOINT_URL_SFN": a.srv.URL, "AWS_ENDPOINT_URL_SECRETS_MANAGER": a.srv.URL}
}

func (a *fakeAWS) serve(w http.ResponseWriter, r *http.Request) {
	switch target := r.Header.Get("X-Amz-Target"); {
	case strings.HasPrefix(target, "AWSStepFunctions."):
		a.stepFunctions(w, r, strings.TrimPrefix(target, "AWSStepFunctions."))
		return
	case strings.HasPrefix(target, "secretsmanager."):
		a.secretsManager(w, r, strings.TrimPrefix(target, "secretsmanager."))
		return
	}
	key := strings.TrimPrefix(r.URL.Path, "/")
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		body, err := readS3Body(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.objects[key] = object{body: body, contentType: r.Header.Get("Content-Type")}
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, len(body)))
	case http.MethodGet, http.MethodHead:
		o, ok := a.objects[key]
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			return
		}
		w.Header().Set("Content-Type", o.contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(o.body)))
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, len(o.body)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(o.body)
		}
	case http.MethodDelete:
		delete(a.objects, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "not supported by the fake", http.StatusNotImplemented)
	}
}

// readS3Body reads a PutObject body, decoding aws-chunked encoding (the
// SDK's trailing checksums) when it is used.
func readS3Body(r *http.Request) ([]byte, error) {
	if !strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") &&
		!strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return io.ReadAll(r.Body)
	}
	var out bytes.Buffer
	br := bufio.NewReader(r.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("aws-chunked: %w", err)
		}
		size, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("aws-chunked size %q: %w", line, err)
		}
		if size == 0 {
			return out.Bytes(), nil // trailers follow
		}
		if _, err := io.CopyN(&out, br, size); err != nil {
			return nil, fmt.Errorf("aws-chunked: %w", err)
		}
		if _, err := br.ReadString('\n'); err != nil {
			return nil, fmt.Errorf("aws-chunked: %w", err)
		}
	}
}

func (a *fakeAWS) stepFunctions(w http.ResponseWriter, r *http.Request, op string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	now := float64(time.Now().UnixMilli()) / 1000
	a.mu.Lock()
	defer a.mu.Unlock()
	switch op {
	case "StartExecution":
		var in startExecution
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.executions = append(a.executions, in)
		arn := strings.Replace(in.StateMachineArn, ":stateMachine:", ":execution:", 1) + ":" + in.Name
		_ = json.NewEncoder(w).Encode(map[string]any{"executionArn": arn, "startDate": now})
	case "DescribeExecution":
		var in struct {
			ExecutionArn string `json:"executionArn"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		_ = json.NewEncoder(w).Encode(map[string]any{"executionArn": in.ExecutionArn, "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:clientagent-test-turn",
			"status": "RUNNING", "startDate": now})
	case "SendTaskSuccess":
		var in taskAnswer
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.answers = append(a.answers, in)
		fmt.Fprint(w, `{}`)
	default:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":"UnknownOperationException","message":"%s is not supported by the fake"}`, op)
	}
}

func (a *fakeAWS) secretsManager(w http.ResponseWriter, r *http.Request, op string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	var in struct{ SecretId string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	a.mu.Lock()
	defer a.mu.Unlock()
	value, ok := a.secrets[in.SecretId]
	switch {
	case op != "GetSecretValue":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":"UnknownOperationException","message":"%s is not supported by the fake"}`, op)
	case !ok:
		a.secretReads[in.SecretId]++
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}`)
	default:
		a.secretReads[in.SecretId]++
		_ = json.NewEncoder(w).Encode(map[string]any{"ARN": in.SecretId, "Name": "secret", "SecretString": value,
			"VersionId": "v1", "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": 1.7e9})
	}
}

// reads is how many times GetSecretValue asked for secret id.
func (a *fakeAWS) reads(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.secretReads[id]
}

// keys lists the objects under bucket/prefix.
func (a *fakeAWS) keys(bucket, prefix string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k := range a.objects {
		if strings.HasPrefix(k, bucket+"/"+prefix) {
			out = append(out, k)
		}
	}
	return out
}

func (a *fakeAWS) object(key string) (object, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.objects[key]
	return o, ok
}

func (a *fakeAWS) lastExecution(tb testing.TB) startExecution {
	tb.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.executions) == 0 {
		tb.Fatal("no StartExecution call")
	}
	return a.executions[len(a.executions)-1]
}

func (a *fakeAWS) lastAnswer(tb testing.TB) taskAnswer {
	tb.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.answers) == 0 {
		tb.Fatal("no SendTaskSuccess call")
	}
	return a.answers[len(a.answers)-1]
}
