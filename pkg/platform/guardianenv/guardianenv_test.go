package guardianenv_test

import (
	"testing"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/guardianenv"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		wantName string
		wantErr  bool
	}{
		{"no guardian", nil, "", false},
		{"the demo guardian", map[string]string{guardian.EnvGuardian: "a2a:http://127.0.0.1:8080/agents/guardian"},
			"a2a:http://127.0.0.1:8080/agents/guardian#guardian_check", false},
		{"a bad agent auth setting stops the cold start", map[string]string{guardian.EnvGuardian: "a2a:http://127.0.0.1:8080/agents/guardian",
			"CLIENTAGENT_AGENT_AUTH": "basic"}, "", true},
		{"a bad guardian setting stops the cold start", map[string]string{guardian.EnvGuardian: "moderation"}, "", true},
	}
	for _, tc := range tests {
		env := platform.NewEnv(func(k string) string { return tc.env[k] })
		c, err := guardianenv.Load(t.Context(), env)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: Load() error = %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if c.Name() != tc.wantName {
			t.Errorf("%s: Load() = %q, want %q", tc.name, c.Name(), tc.wantName)
		}
	}
}
