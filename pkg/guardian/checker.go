package guardian

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The environment variables of the guardian (guardianconfig reads the
// first; PolicyFromEnv the others).
const (
	// EnvGuardian chooses the implementation: empty for none,
	// rules:<file>, a2a:<agent URL>[#skill] or bedrock:<guardrail id>:<version>.
	EnvGuardian = "CLIENTAGENT_GUARDIAN"
	// EnvChecks lists the kinds checked, comma-separated (default all).
	EnvChecks = "CLIENTAGENT_GUARDIAN_CHECKS"
	// EnvFailOpen lists the kinds whose check lets the input through when
	// the guardian fails, comma-separated (default none: fail closed).
	EnvFailOpen = "CLIENTAGENT_GUARDIAN_FAIL_OPEN"
	// EnvTimeout is the deadline of one check (a Go duration, default 5s).
	EnvTimeout = "CLIENTAGENT_GUARDIAN_TIMEOUT"
)

// DefaultTimeout is the deadline of one check when the Policy sets none.
const DefaultTimeout = 5 * time.Second

// Policy says which kinds are checked, which fail open, and how long a
// check may take. The zero Policy checks every kind, fails closed, and
// gives each check DefaultTimeout.
type Policy struct {
	// Checks are the kinds checked; nil means all of them.
	Checks []Kind
	// FailOpen are the kinds let through when the guardian fails; the
	// audit records each such pass.
	FailOpen []Kind
	// Timeout bounds one check (0: DefaultTimeout).
	Timeout time.Duration
}

// Checked reports whether kind k is checked.
func (p Policy) Checked(k Kind) bool { return p.Checks == nil || slices.Contains(p.Checks, k) }

// FailsOpen reports whether a failed check of kind k lets the input through.
func (p Policy) FailsOpen(k Kind) bool { return slices.Contains(p.FailOpen, k) }

func (p Policy) timeout() time.Duration {
	if p.Timeout <= 0 {
		return DefaultTimeout
	}
	return p.Timeout
}

// PolicyFromEnv reads the policy from CLIENTAGENT_GUARDIAN_CHECKS,
// CLIENTAGENT_GUARDIAN_FAIL_OPEN and CLIENTAGENT_GUARDIAN_TIMEOUT. An
// unknown kind or a bad duration is an error, so a typo does not silently
// turn a check off or make it fail open.
func PolicyFromEnv(getenv func(string) string) (Policy, error) {
	var p Policy
	var err error
	if v := strings.TrimSpace(getenv(EnvChecks)); v != "" {
		if p.Checks, err = parseKinds(v); err != nil {
			return Policy{}, fmt.Errorf("%s: %w", EnvChecks, err)
		}
	}
	if p.FailOpen, err = parseKinds(getenv(EnvFailOpen)); err != nil {
		return Policy{}, fmt.Errorf("%s: %w", EnvFailOpen, err)
	}
	if v := strings.TrimSpace(getenv(EnvTimeout)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Policy{}, fmt.Errorf("%s=%q: want a positive Go duration such as 5s", EnvTimeout, v)
		}
		p.Timeout = d
	}
	return p, nil
}

// parseKinds reads a comma-separated list of kinds; empty is none
// (a non-nil empty list).
func parseKinds(s string) ([]Kind, error) {
	out := []Kind{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		k, err := ParseKind(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// Checker applies one Guardian under a Policy. A nil *Checker is valid:
// it checks nothing and allows everything, so the turn loop needs no
// "is a guardian configured" branch. A Checker is safe for concurrent use
// when its Guardian is (all in this module are).
type Checker struct {
	guardian Guardian
	name     string
	policy   Policy
}

// New returns a Checker of g under p; name identifies the guardian in
// decisions that name no rule and in errors (e.g. "a2a:http://…"). A nil
// g gives a nil Checker.
func New(g Guardian, name string, p Policy) *Checker {
	if g == nil {
		return nil
	}
	return &Checker{guardian: g, name: name, policy: p}
}

// Name identifies the guardian ("" for a nil Checker).
func (c *Checker) Name() string {
	if c == nil {
		return ""
	}
	return c.name
}

// Enabled reports whether inputs of kind k are checked: false for a nil
// Checker. The loop may use it to skip preparing an input (or starting a
// goroutine for it).
func (c *Checker) Enabled(k Kind) bool { return c != nil && c.policy.Checked(k) }

// Verdict is the Checker's answer: the decision to apply, whether it comes
// from a failed check the Policy let through, and what to audit.
type Verdict struct {
	Decision
	// FailedOpen is set when the guardian failed and the Policy let the
	// input through: Action is Allow and Reason says what failed.
	FailedOpen bool
	// Audit is the record to write (Record.Event), or nil when there is
	// nothing to record: every block, redaction and fail-open pass has one,
	// an allowed input none.
	Audit *Record
}

// CheckError is a guardian failure under a fail-closed policy: the caller fails
// the turn with it. It is returned as *CheckError, unwrapped, so that a state
// machine can tell it apart by its type name.
type CheckError struct {
	Kind     Kind
	Guardian string
	Err      error
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("the guardian could not check the %s: %v", strings.ReplaceAll(string(e.Kind), "_", " "), e.Err)
}

func (e *CheckError) Unwrap() error { return e.Err }

// Check checks in within the Policy's deadline. An unchecked kind (or a
// nil Checker) is allowed without asking the guardian. A guardian that
// fails or answers with an unknown action is a *CheckError, unless the
// Policy lets in.Kind fail open: then the verdict allows, with FailedOpen
// and an audit record. A Redact of a ToolCall becomes a Block (see the
// package doc). A decision that names no rule names the guardian.
func (c *Checker) Check(ctx context.Context, in Input) (Verdict, error) {
	if !c.Enabled(in.Kind) {
		return Verdict{Decision: Decision{Action: Allow}}, nil
	}
	timeout := c.policy.timeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	d, err := c.guardian.Check(cctx, in)
	cancel()
	if err == nil {
		err = validAction(d.Action)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		if !c.policy.FailsOpen(in.Kind) {
			return Verdict{}, &CheckError{Kind: in.Kind, Guardian: c.name, Err: err}
		}
		d = Decision{Action: Allow, Rule: c.name, Reason: "the guardian failed and the policy lets this check fail open: " + err.Error()}
		rec := Audit(in, d, true)
		return Verdict{Decision: d, FailedOpen: true, Audit: &rec}, nil
	}
	if d.Rule == "" {
		d.Rule = c.name
	}
	if d.Action == Redact && in.call() {
		reason := "its arguments would need redacting"
		if d.Reason != "" {
			reason += ": " + d.Reason
		}
		d = Decision{Action: Block, Rule: d.Rule, Reason: reason}
	}
	if d.Action == Allow {
		return Verdict{Decision: Decision{Action: Allow, Rule: d.Rule, Reason: d.Reason}}, nil
	}
	rec := Audit(in, d, false)
	return Verdict{Decision: d, Audit: &rec}, nil
}

func validAction(a Action) error {
	switch a {
	case Allow, Block, Redact:
		return nil
	}
	return fmt.Errorf("unknown decision %q", a)
}
