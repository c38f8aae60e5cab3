package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	testGuardrailID      = "abc123def456"
	testGuardrailVersion = "3"
)

func init() {
	// staging from cdk.json with a guardrail set on the command line.
	configs["guardrail"] = fromCDKJSON("staging", map[string]any{CtxGuardrailID: testGuardrailID, CtxGuardrailVersion: testGuardrailVersion})
}

// Issue 19: a Bedrock guardrail per environment. The functions that check
// get CLIENTAGENT_GUARDIAN and may apply exactly that guardrail; without
// one no function gets either.
func TestGuardrail(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"guardrail", "bedrock", "dev"} {
		s := synth(t, config)
		configured := s.props.GuardrailID != ""
		if configured != (config == "guardrail") {
			t.Fatalf("%s: guardrailId = %q", config, s.props.GuardrailID)
		}
		names := functionNames()
		if s.props.DemoAgents {
			names = append(names, FnDemoAgents)
		}
		for _, name := range names {
			_, fn := s.function(t, name)
			checks := configured && slices.Contains(GuardianFunctions, name)
			env, hasEnv := envOf(fn)["CLIENTAGENT_GUARDIAN"]
			if hasEnv != checks || (checks && env != "bedrock:"+testGuardrailID+":"+testGuardrailVersion) {
				t.Errorf("%s: %s CLIENTAGENT_GUARDIAN = %v (set %v), want set %v to bedrock:%s:%s",
					config, name, env, hasEnv, checks, testGuardrailID, testGuardrailVersion)
			}
			grants := allowed(s.roleStatements(t, fn, "Role"), "bedrock:ApplyGuardrail")
			if !checks {
				if len(grants) > 0 {
					t.Errorf("%s: %s may bedrock:ApplyGuardrail on %v, want no grant", config, name, grants)
				}
				continue
			}
			// Exactly arn:<partition>:bedrock:<region>:<account>:guardrail/<id>.
			if len(grants) != 1 {
				t.Errorf("%s: %s may bedrock:ApplyGuardrail on %v, want the one guardrail", config, name, grants)
				continue
			}
			g := grants[0]
			for _, part := range []string{`"arn:"`, `"Ref":"AWS::Partition"`, `":bedrock:"`, `"Ref":"AWS::Region"`, `"Ref":"AWS::AccountId"`, `":guardrail/` + testGuardrailID + `"`} {
				if !strings.Contains(g, part) {
					t.Errorf("%s: %s ApplyGuardrail resource %s lacks %s", config, name, g, part)
				}
			}
			if strings.Contains(g, "*") {
				t.Errorf("%s: %s ApplyGuardrail resource %s has a wildcard", config, name, g)
			}
		}
	}
}

// cdk.json names no guardrail in any environment: the guardian is off
// until someone sets one.
func TestCDKJSONGuardrails(t *testing.T) {
	t.Parallel()
	ctx, err := ReadCDKJSONContext(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"dev", "staging", "prod"} {
		block, _ := ctx[CtxEnvironments].(map[string]any)[env].(map[string]any)
		if _, ok := block[CtxGuardrailID]; !ok {
			t.Errorf("cdk.json %s: no %s key (empty: no guardian)", env, CtxGuardrailID)
		}
		c := map[string]any{CtxEnv: env, CtxBinDir: testBinDir, CtxASLFile: aslPath}
		p, err := PropsFromContext(func(k string) any {
			if v, ok := c[k]; ok {
				return v
			}
			return ctx[k]
		})
		if err != nil {
			t.Fatalf("%s: PropsFromContext() error = %v", env, err)
		}
		if p.GuardrailID != "" || p.GuardrailVersion != "" {
			t.Errorf("%s: guardrail %q:%q, want none by default", env, p.GuardrailID, p.GuardrailVersion)
		}
	}
}

func TestValidateGuardrail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, version string
		want        string // "" for valid
	}{
		{"", "", ""},
		{testGuardrailID, "1", ""},
		{testGuardrailID, "DRAFT", ""},
		{testGuardrailID, "", "set both"},
		{"", "1", "set both"},
		{"arn:aws:bedrock:us-east-1:123456789012:guardrail/abc", "1", "not its ARN"},
		{testGuardrailID, "v1", "version number or DRAFT"},
		{testGuardrailID, "0", "version number or DRAFT"},
	}
	for _, tc := range tests {
		p := baseProps()
		p.GuardrailID, p.GuardrailVersion = tc.id, tc.version
		err := p.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(guardrail %q:%q) = %v, want %q", tc.id, tc.version, err, tc.want)
		}
	}
}
