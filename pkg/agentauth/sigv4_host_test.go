package agentauth_test

import (
	"testing"

	"github.com/clientagent/clientagent/pkg/agentauth"
)

// With CLIENTAGENT_AGENT_AUTH=sigv4 only the demo agents' Function URLs are
// signed: any other agent host never sees the role's credentials.
func TestIsLambdaURLHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"abc123.lambda-url.eu-central-1.on.aws", true},
		{"ABC123.LAMBDA-URL.EU-CENTRAL-1.ON.AWS", true},
		{"abc123.lambda-url.us-east-1.on.aws", false},
		{"evil.abc123.lambda-url.eu-central-1.on.aws", false},
		{".lambda-url.eu-central-1.on.aws", false},
		{"agents.example.com", false},
		{"abc123.lambda-url.eu-central-1.on.aws.evil.com", false},
	} {
		if got := agentauth.IsLambdaURLHost(tc.host, "eu-central-1"); got != tc.want {
			t.Errorf("IsLambdaURLHost(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
