package guardianconfig_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/guardian/bedrock"
	"github.com/clientagent/clientagent/pkg/guardian/guardianconfig"
)

// fakeBedrock answers every ApplyGuardrail with NONE and records the
// guardrail asked.
type fakeBedrock struct{ id, version string }

func (f *fakeBedrock) ApplyGuardrail(_ context.Context, id, version, _, _ string) (*bedrock.Result, error) {
	f.id, f.version = id, version
	return &bedrock.Result{Action: "NONE"}, nil
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		wantName string // "" for no guardian
		wantErr  string
	}{
		{"none by default", nil, "", ""},
		{"rules", map[string]string{guardian.EnvGuardian: "rules:../rules/testdata/rules.yaml"}, "rules:../rules/testdata/rules.yaml", ""},
		{"a2a with a skill", map[string]string{guardian.EnvGuardian: "a2a:http://127.0.0.1:8080/agents/guardian#guardian_check"},
			"a2a:http://127.0.0.1:8080/agents/guardian#guardian_check", ""},
		{"bedrock", map[string]string{guardian.EnvGuardian: "bedrock:gr-1:3", guardian.EnvTimeout: "2s"}, "bedrock:gr-1:3", ""},
		{"bad rules file", map[string]string{guardian.EnvGuardian: "rules:missing.yaml"}, "", "missing.yaml"},
		{"bad a2a URL", map[string]string{guardian.EnvGuardian: "a2a:guardian"}, "", "http://"},
		{"bedrock without version", map[string]string{guardian.EnvGuardian: "bedrock:gr-1"}, "", "bedrock:<guardrail id>:<version>"},
		{"unknown implementation", map[string]string{guardian.EnvGuardian: "openai:moderation"}, "", "want rules:"},
		{"bad policy", map[string]string{guardian.EnvGuardian: "bedrock:gr-1:3", guardian.EnvFailOpen: "everything"}, "", guardian.EnvFailOpen},
	}
	for _, tc := range tests {
		fb := &fakeBedrock{}
		c, err := guardianconfig.FromEnv(t.Context(), func(k string) string { return tc.env[k] }, guardianconfig.Options{Bedrock: fb})
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: FromEnv() error = %v, want one containing %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: FromEnv() error = %v", tc.name, err)
			continue
		}
		if got := c.Name(); got != tc.wantName {
			t.Errorf("%s: FromEnv() guardian = %q, want %q", tc.name, got, tc.wantName)
		}
		if tc.wantName == "bedrock:gr-1:3" {
			v, err := c.Check(t.Context(), guardian.Input{Kind: guardian.Request, Text: "hi"})
			if err != nil || v.Action != guardian.Allow || fb.id != "gr-1" || fb.version != "3" {
				t.Errorf("%s: Check() = %+v, %v asking %s:%s; want allow from gr-1:3", tc.name, v, err, fb.id, fb.version)
			}
		}
	}
}

// The bedrock guardian without a client of the caller's builds one from
// the AWS environment, and needs a region.
func TestFromEnvBedrockNeedsRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	env := map[string]string{guardian.EnvGuardian: "bedrock:gr-1:1"}
	if _, err := guardianconfig.FromEnv(t.Context(), func(k string) string { return env[k] }, guardianconfig.Options{}); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("FromEnv(no region) error = %v, want one asking for a region", err)
	}
	t.Setenv("AWS_REGION", "eu-west-1")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if c, err := guardianconfig.FromEnv(ctx, func(k string) string { return env[k] }, guardianconfig.Options{}); err != nil || c == nil {
		t.Errorf("FromEnv(region) = %v, %v; want a checker", c, err)
	}
}
