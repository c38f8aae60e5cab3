package chatcli

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// outageAPI answers a message with turn t1 whose GETs answer the given
// replies in order (the last one repeats) and records when each GET came.
type outageAPI struct {
	replies []outageReply
	mu      sync.Mutex
	gets    []time.Time
}

type outageReply struct {
	status     int
	code       string
	retryAfter string // the Retry-After header, "" for none
}

func (o *outageAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/conversations/c0/messages":
		writeJSON(w, http.StatusAccepted, map[string]string{"turn_id": "t1", "status": "running"})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/conversations/c0/turns/t1":
		o.mu.Lock()
		o.gets = append(o.gets, time.Now())
		rep := o.replies[min(len(o.gets), len(o.replies))-1]
		o.mu.Unlock()
		if rep.status == http.StatusOK {
			writeJSON(w, http.StatusOK, Turn{TurnID: "t1", Status: StatusSucceeded, Reply: "Done after all."})
			return
		}
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		writeErr(w, rep.status, rep.code, "the store did not answer")
	default:
		writeErr(w, http.StatusNotFound, "not_found", r.URL.Path)
	}
}

// A 503 (store_unavailable, store_full) says "the service is unavailable,
// retrying" once and polls again only after Retry-After, instead of piling
// up polls or giving up after three quick tries; other 5xx keep the quick
// bounded retries.
func TestFollowBacksOffOn503(t *testing.T) {
	t.Parallel()
	ok := outageReply{status: http.StatusOK}
	tests := []struct {
		name     string
		replies  []outageReply
		gets     int
		minGap   time.Duration // between consecutive GETs during the outage
		want     []string
		dontWant string
	}{
		{
			name:    "store_unavailable, Retry-After 1",
			replies: []outageReply{{503, "store_unavailable", "1"}, {503, "store_unavailable", "1"}, {503, "store_unavailable", "1"}, ok},
			gets:    4, minGap: 900 * time.Millisecond,
			want:     []string{"the service is unavailable, retrying in 1s (store_unavailable)", "the service is back", "Done after all."},
			dontWant: "error:",
		},
		{
			name:    "store_full, Retry-After as an HTTP date",
			replies: []outageReply{{503, "store_full", time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}, ok},
			gets:    2, minGap: 900 * time.Millisecond,
			want:     []string{"the service is unavailable, retrying in", "(store_full)", "Done after all."},
			dontWant: "error:",
		},
		{
			name:    "500 is retried quickly, three times",
			replies: []outageReply{{500, "internal", ""}},
			gets:    4,
			want:    []string{"error: read turn t1: the store did not answer (HTTP 500 internal)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &outageAPI{replies: tc.replies}
			srv := httptest.NewServer(api)
			t.Cleanup(srv.Close)
			out := run(t, srv, "hello\n", Options{Conversation: "c0"})
			wantInOrder(t, out, tc.want...)
			if tc.dontWant != "" && strings.Contains(out, tc.dontWant) {
				t.Errorf("output has %q:\n%s", tc.dontWant, out)
			}
			if n := strings.Count(out, "the service is unavailable"); n > 1 {
				t.Errorf("output says the service is unavailable %d times, want once per outage:\n%s", n, out)
			}
			api.mu.Lock()
			defer api.mu.Unlock()
			if len(api.gets) != tc.gets {
				t.Errorf("GETs of the turn = %d, want %d", len(api.gets), tc.gets)
			}
			for i := 1; i < len(api.gets) && tc.minGap > 0; i++ {
				if gap := api.gets[i].Sub(api.gets[i-1]); gap < tc.minGap {
					t.Errorf("GET %d came %s after the one before, want at least %s (Retry-After)", i+1, gap, tc.minGap)
				}
			}
		})
	}
}

// An upload API Gateway refuses before the function runs (over Lambda's 6 MB
// payload) answers in the gateway's own shape; its message is shown, not
// just the status.
func TestGatewayErrorMessage(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = w.Write([]byte(`{"message":"Request Entity Too Large"}`))
	}))
	t.Cleanup(srv.Close)
	c := &Client{BaseURL: srv.URL, Token: testToken, HTTP: srv.Client()}
	_, err := c.UploadArtifact(t.Context(), "c0", "big.bin", "application/octet-stream", strings.NewReader("x"))
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge || !strings.Contains(ae.Message, "Request Entity Too Large") {
		t.Errorf("UploadArtifact() = %v, want a 413 APIError carrying the gateway's message", err)
	}
}
