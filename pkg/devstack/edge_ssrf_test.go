package devstack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
)

// fileURLAgent is a specialist that answers every call with a file by URL,
// the URL chosen by the test.
type fileURLAgent struct{ uri string }

func (a *fileURLAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	task := &a2a.Task{ID: rc.TaskID, ContextID: rc.ContextID}
	task.Artifacts = []*a2a.Artifact{{ID: "r1", Name: "report", Parts: a2a.ContentParts{
		a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: "report.txt", MimeType: "text/plain"}, URI: a.uri}},
	}}}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: "Here is the report."})}
	return q.Write(ctx, task)
}

func (a *fileURLAgent) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return nil
}

// serveFileURLAgent serves ag with a card offering the skill fetch_report.
func serveFileURLAgent(t *testing.T, ag *fileURLAgent) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := a2a.AgentCard{
		Name: "reports", Description: "Returns reports by URL", URL: srv.URL + "/", Version: "1",
		ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes: []string{"application/json"}, DefaultOutputModes: []string{"text/plain"},
		Capabilities: a2a.AgentCapabilities{Extensions: []a2a.AgentExtension{{
			URI: catalog.ExtensionURI,
			Params: map[string]any{"skills": map[string]any{"fetch_report": catalog.SkillExtension{
				InputSchema: json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string"}},"required":["topic"]}`),
			}}},
		}}},
		Skills: []a2a.AgentSkill{{ID: "fetch_report", Name: "fetch report", Description: "Returns a report file.", Tags: []string{"report"}}},
	}
	mux.HandleFunc("/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
	})
	mux.Handle("/", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(ag)))
	return srv.URL
}

// Issue 14: the local stack applies the same dial-time check as Lambda to a
// file a specialist returns by URL. An agent on this machine that points
// the platform at another loopback service (here one holding a secret, as
// the stack's own Valkey or a metadata proxy would) gets a failed result,
// and the secret never becomes an artifact; by a name resolving to
// loopback too, not only by its IP.
func TestLocalStackRefusesPrivateFileURLs(t *testing.T) {
	t.Parallel()
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("internal secret"))
	}))
	t.Cleanup(secret.Close)
	port := secret.URL[strings.LastIndex(secret.URL, ":")+1:]

	for _, uri := range []string{secret.URL + "/report.txt", "http://localhost:" + port + "/report.txt"} {
		t.Run(uri, func(t *testing.T) {
			t.Parallel()
			agentURL := serveFileURLAgent(t, &fileURLAgent{uri: uri})
			m := &model{decide: func(req llm.Request) *llm.Response {
				if res := toolResults(req); len(res) > 0 {
					b, _ := json.Marshal(res)
					return answer("results: " + string(b))
				}
				return calls(call("r1", "fetch_report", map[string]any{"topic": "q3"}))
			}}
			_, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{agentURL} })
			cid := c.newConversation()
			v := c.wait(cid, c.send(cid, "Fetch the Q3 report"))
			if v.Status != "succeeded" {
				t.Fatalf("turn = %s %q, want succeeded (the model reads the failed result)", v.Status, v.Reply)
			}
			for _, a := range v.Artifacts {
				t.Errorf("turn stored artifact %+v, want none from a loopback URL", a)
			}
			if !strings.Contains(v.Reply, `"status":"failed"`) || !strings.Contains(v.Reply, "not a public address") {
				t.Errorf("tool result the model read = %s, want failed: not a public address", v.Reply)
			}
			if strings.Contains(v.Reply, "internal secret") {
				t.Errorf("the secret reached the model: %s", v.Reply)
			}
		})
	}
}
