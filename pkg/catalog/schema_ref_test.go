package catalog

import (
	"encoding/json"
	"strings"
	"testing"
)

// A skill schema from an agent card must not make the platform read local
// files or fetch URLs through $ref.
func TestSchemaRefsCannotLoad(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{"file:///etc/hostname", "http://169.254.169.254/latest/meta-data"} {
		c := New([]Capability{{Tool: "evil", SkillID: "evil", Description: "x",
			SkillExtension: SkillExtension{InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"` + ref + `"}}}`)}}}, nil)
		e, ok := c.Lookup("evil")
		if !ok {
			t.Fatal("Lookup(evil) = false")
		}
		err := e.Validate(map[string]any{"a": "x"})
		if err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("Validate() with $ref %s = %v, want the ref refused", ref, err)
		}
	}
}
