package agentauth

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Issue 17: another clientagent registered as a specialist wants a bearer
// token; CLIENTAGENT_AGENT_TOKENS gives it one, and only to its origin.
func TestAgentTokens(t *testing.T) {
	t.Parallel()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, "other:"+r.Header.Get("Authorization"))
	}))
	defer other.Close()
	env := map[string]string{AgentTokensEnv: srv.URL + "/ignored/path=tok123, https://elsewhere.example=x"}
	c, err := ClientFromEnv(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{srv.URL + "/a2a", other.URL + "/a2a"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Authorization", "Bearer mine")
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}
	want := []string{"Bearer tok123", "other:", "Bearer mine"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("Authorization headers = %q, want %q", got, want)
	}
	for _, bad := range []string{"nourl", "ftp://x=1", "http://h=", "=tok"} {
		if _, err := ClientFromEnv(t.Context(), func(k string) string { return map[string]string{AgentTokensEnv: bad}[k] }); err == nil {
			t.Errorf("%s=%q accepted, want an error", AgentTokensEnv, bad)
		}
	}
}
