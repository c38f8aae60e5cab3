package toolenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/platform"
)

func TestCatalogs(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) *platform.Env {
		kv["VALKEY_URL"] = "redis://127.0.0.1:1/0"
		return platform.NewEnv(func(k string) string { return kv[k] })
	}
	c, err := Catalogs(t.Context(), env(map[string]string{"CLIENTAGENT_AGENTS": "http://a.example/agents/svg, http://b.example/x/"}), nil)
	if err != nil {
		t.Fatalf("Catalogs() = %v", err)
	}
	var got []string
	if len(c.Sources) == 1 {
		if reg, ok := c.Sources[0].(*agents.Registry); ok {
			got = reg.URLs()
		}
	}
	if len(got) != 2 || len(c.Workflows) == 0 {
		t.Errorf("Catalogs() = agents %v, %d workflows; want one source, the registry of 2 agents, and the built-in workflows", got, len(c.Workflows))
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "broken.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, kv := range map[string]map[string]string{
		"agent auth":       {"CLIENTAGENT_AGENT_AUTH": "basic"},
		"broken templates": {"CLIENTAGENT_WORKFLOWS_DIR": bad},
	} {
		if _, err := Catalogs(t.Context(), env(kv), nil); err == nil {
			t.Errorf("Catalogs(%s %v) = nil error, want an error", name, kv)
		}
	}
}
