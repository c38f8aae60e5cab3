package a2aserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/go-cmp/cmp"

	clientagent "github.com/clientagent/clientagent"
	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/turn"
)

// staticCatalogs is a turn.Catalogs of one built catalogue.
type staticCatalogs struct{ cat *catalog.Catalog }

var _ turn.Catalogs = staticCatalogs{}

func (s staticCatalogs) Catalog(context.Context) (*catalog.Catalog, error) { return s.cat, nil }

// demoCatalog is the catalogue of the demo specialists (served in process)
// and the built-in workflow templates.
func demoCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	srv := httptest.NewServer(demoagents.Handler("", demoagents.Options{}))
	t.Cleanup(srv.Close)
	caps, err := agents.NewRegistry(agents.RegistryOptions{URLs: demoagents.AgentURLs(srv.URL)}).Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wfs, err := catalog.LoadWorkflows(clientagent.Workflows, clientagent.WorkflowsDir)
	if err != nil {
		t.Fatal(err)
	}
	return catalog.New(caps, wfs)
}

// TestCardAsSpecialist reads the card the way clientagent's own registry
// reads a specialist's (agents.CapabilitiesFromCard, after a JSON round
// trip): the chat skill and one typed skill per workflow, at the card's URL.
func TestCardAsSpecialist(t *testing.T) {
	t.Parallel()
	cat := demoCatalog(t)
	s := &Server{Catalogs: staticCatalogs{cat}, Path: "/a2a", Streaming: true}
	card, err := s.Card(t.Context(), "https://agent.example")
	if err != nil {
		t.Fatalf("Card() error = %v", err)
	}
	b, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	var read a2a.AgentCard
	if err := json.Unmarshal(b, &read); err != nil {
		t.Fatalf("card does not read back: %v", err)
	}
	if read.URL != "https://agent.example/a2a" || !read.Capabilities.Streaming || len(read.Security) != 1 {
		t.Errorf("card URL %q, streaming %v, security %v; want the endpoint, streaming and a bearer requirement", read.URL, read.Capabilities.Streaming, read.Security)
	}

	caps := agents.CapabilitiesFromCard(&read, "https://agent.example/a2a")
	byTool := map[string]catalog.Capability{}
	var tools []string
	for _, c := range caps {
		byTool[c.Tool] = c
		tools = append(tools, c.Tool)
	}
	if diff := cmp.Diff([]string{"chat", "flange_drawing", "publish_word", "word_to_png"}, tools); diff != "" {
		t.Fatalf("skills as tools (-want +got):\n%s", diff)
	}
	for _, c := range caps {
		if c.Plain || c.AgentURL != "https://agent.example/a2a" || c.Description == "" || c.RequiresApproval {
			t.Errorf("capability %s = %+v, want typed (extension), at the card's URL, described, without requires_approval", c.Tool, c)
		}
	}
	var chat map[string]any
	if err := json.Unmarshal(byTool["chat"].InputSchema, &chat); err != nil || chat["required"].([]any)[0] != "text" {
		t.Errorf("chat input schema = %s, want a required text", byTool["chat"].InputSchema)
	}
	// A workflow skill's schema is its tool's parameters here, so a caller
	// validates its inputs as this catalogue does.
	for _, id := range []string{"flange_drawing", "publish_word", "word_to_png"} {
		var want json.RawMessage
		for _, d := range cat.Tools() {
			if d.Name == catalog.WorkflowToolName(id) {
				want = d.Parameters
			}
		}
		if diff := cmp.Diff(jsonValue(t, want), jsonValue(t, byTool[id].InputSchema)); diff != "" {
			t.Errorf("%s input schema (-want +got):\n%s", id, diff)
		}
	}
	if diff := cmp.Diff([]string{"drawing.material"}, byTool["flange_drawing"].UserInput); diff != "" {
		t.Errorf("flange_drawing user_input (-want +got):\n%s", diff)
	}
	if len(byTool["publish_word"].UserInput) != 0 {
		t.Errorf("publish_word user_input = %v, want none", byTool["publish_word"].UserInput)
	}

	// The same card as a catalogue of the calling clientagent.
	outer := catalog.New(caps, nil)
	if e, ok := outer.Lookup("flange_drawing"); !ok || e.Validate(map[string]any{"drawing.holes": 6, "drawing.outer_diameter_mm": 120}) != nil {
		t.Errorf("outer catalogue: flange_drawing %v, or its inputs without the user's material refused", ok)
	}
}

func jsonValue(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}
