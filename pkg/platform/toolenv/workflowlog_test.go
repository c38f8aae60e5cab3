package toolenv

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/tool"
)

// A deployment without the specialists of the built-in workflow
// templates (prod as configured) logs one WARN line naming each missing
// skill, not an ERROR per template, and nothing more while that stays so;
// a template broken in itself is still an ERROR.
func TestWorkflowsWithoutSkillsWarnOnce(t *testing.T) {
	t.Parallel()
	workflows, err := loadWorkflows(Config{})
	if err != nil || len(workflows) == 0 {
		t.Fatalf("loadWorkflows() = %d templates, %v", len(workflows), err)
	}
	var buf bytes.Buffer
	c := &tool.Catalogs{
		Sources:   []tool.Lister{agents.NewRegistry(agents.RegistryOptions{})},
		Workflows: workflows,
		Logger:    slog.New(slog.NewJSONHandler(&buf, nil)),
	}
	for range 3 {
		if _, err := c.Catalog(t.Context()); err != nil {
			t.Fatalf("Catalog() = %v", err)
		}
		c.Invalidate()
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("logged %d lines, want 1:\n%s", len(lines), buf.String())
	}
	var rec struct{ Level, Msg, Missing string }
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Level != "WARN" {
		t.Errorf("level = %s, want WARN: %s", rec.Level, lines[0])
	}
	for _, w := range workflows {
		if !strings.Contains(rec.Missing, w.ID+" needs "+w.Steps[0].Skill) {
			t.Errorf("missing = %q, want %s needs %s", rec.Missing, w.ID, w.Steps[0].Skill)
		}
	}

	buf.Reset()
	broken := catalog.Workflow{ID: "broken", Steps: []catalog.WorkflowStep{{Name: "Nothing"}}}
	c = &tool.Catalogs{Sources: []tool.Lister{agents.NewRegistry(agents.RegistryOptions{})}, Workflows: []catalog.Workflow{broken, workflows[0]},
		Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	if _, err := c.Catalog(t.Context()); err != nil {
		t.Fatalf("Catalog() = %v", err)
	}
	if got := buf.String(); strings.Count(got, `"level":"ERROR"`) != 1 || strings.Count(got, `"level":"WARN"`) != 1 {
		t.Errorf("a broken template and one without its skill logged:\n%s\nwant one ERROR and one WARN", got)
	}
}
