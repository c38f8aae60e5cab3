package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
)

// keysDown is an issuer whose signing keys cannot be fetched.
type keysDown struct{}

func (keysDown) Subject(*http.Request) (string, error) {
	return "", fmt.Errorf("check token: %w: dial tcp: i/o timeout", auth.ErrKeysUnavailable)
}

// A token that cannot be checked because the issuer's keys cannot be
// fetched is not a bad token: 503 auth_unavailable with Retry-After, so
// the page keeps its token and its event stream tries again, on the API
// and on the events function alike.
func TestKeysUnavailableIsRetryable(t *testing.T) {
	t.Parallel()
	s := &api.Server{Auth: keysDown{}}
	for name, h := range map[string]http.Handler{"api": s.Handler(), "events": s.EventsHandler()} {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/conversations/c_1/events", nil)
		req.Header.Set("Authorization", "Bearer x.y.z")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "auth_unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: GET events with the keys down = %d %q (Retry-After %q), want 503 auth_unavailable with Retry-After", name, resp.StatusCode, e.Error.Code, resp.Header.Get("Retry-After"))
		}
	}
}
