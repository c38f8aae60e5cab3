package devstack

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/smoke"
)

// Issue 14, `make smoke`: the smoke check passes every step against the
// local stack (CI runs it here; docs/deploy.md runs it after a deploy).
func TestSmokeAgainstTheLocalStack(t *testing.T) {
	t.Parallel()
	st, c := stack(t, nil)
	var out bytes.Buffer
	res, err := smoke.Run(t.Context(), smoke.Config{URL: st.URL(), Token: c.token, Out: &out, TurnTimeout: 30 * time.Second})
	if err != nil || res.Passed != 8 || res.Failed != 0 {
		t.Fatalf("smoke = %+v, %v:\n%s", res, err, out.String())
	}
	if !strings.Contains(out.String(), "over Server-Sent Events") {
		t.Errorf("smoke did not check the local stack's Server-Sent Events:\n%s", out.String())
	}
	for _, step := range []string{"live events", "popelnase turn", "form", "approve", "reject", "download artifact", "delete conversation"} {
		if !strings.Contains(out.String(), "ok   "+step) {
			t.Errorf("smoke output lacks a passing %q line:\n%s", step, out.String())
		}
	}
	for _, said := range []string{"approved, turn succeeded", "rejected, turn succeeded"} {
		if !strings.Contains(out.String(), said) {
			t.Errorf("smoke output lacks %q:\n%s", said, out.String())
		}
	}
	// It must be able to fail: a wrong token fails at the first step.
	out.Reset()
	if res, err := smoke.Run(t.Context(), smoke.Config{URL: st.URL(), Token: "nope", Out: &out}); err == nil || res.Failed == 0 {
		t.Errorf("smoke with a bad token = %+v, %v; want a failure", res, err)
	}
}
