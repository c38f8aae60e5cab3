package agentauth

import (
	"testing"

	"github.com/clientagent/clientagent/pkg/awssign"
)

// Without the variable nothing is signed; with sigv4 the region must be
// set; another value is refused rather than ignored.
func TestClientFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	if hc, err := ClientFromEnv(t.Context(), env()); hc != nil || err != nil {
		t.Errorf("ClientFromEnv(unset) = %v, %v; want nil, nil", hc, err)
	}
	if _, err := ClientFromEnv(t.Context(), env(AgentAuthEnv, "sigv4")); err == nil {
		t.Errorf("ClientFromEnv(sigv4 without AWS_REGION) = nil error, want one")
	}
	if _, err := ClientFromEnv(t.Context(), env(AgentAuthEnv, "iam")); err == nil {
		t.Errorf("ClientFromEnv(iam) = nil error, want one")
	}
	hc, err := ClientFromEnv(t.Context(), env(AgentAuthEnv, "sigv4", "AWS_REGION", "eu-central-1"))
	if err != nil || hc == nil {
		t.Fatalf("ClientFromEnv(sigv4) = %v, %v; want a signing client", hc, err)
	}
	if _, ok := hc.Transport.(*awssign.Transport); !ok {
		t.Errorf("ClientFromEnv(sigv4) transport = %T, want *awssign.Transport", hc.Transport)
	}
}
