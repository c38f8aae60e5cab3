// Package tool is the vocabulary of running the catalog's tools: a Call,
// the Source of capabilities that runs calls of its own (A2A specialists,
// MCP servers), the Catalogs built over every source and the workflow
// templates, the Router that hands a call to the source of its kind (a
// workflow call to pkg/workflow), and what a source says when a call fails
// (Failure, the capped raw payload).
//
// It holds types and the routing between sources, nothing of any one
// source: it must not speak A2A or MCP, fetch anything, or import a
// transport, so that the loop's steps (pkg/turn) can name a call without
// linking any client.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
)

// Call is one skill call to send to the source of its capability.
type Call struct {
	ConversationID, TurnID, CallID string
	Capability                     catalog.Capability
	// Arguments are the merged arguments (model, form answers, context).
	Arguments map[string]any
	// Sources names where each argument came from: model|user|context.
	Sources map[string]string
	// Files are the artifacts the arguments reference (x_artifact_ref),
	// resolved by the caller; each is sent as a FilePart with a URL.
	Files []artifact.Artifact
	// Continue answers an input-required task: the message carries its
	// task and context ids.
	Continue *record.A2ATask
	// Workflow is set on a call of a workflow template's tool
	// (KindWorkflow): what its steps need.
	Workflow *WorkflowCall
}

// WorkflowCall is what a workflow call's steps need beside the call.
type WorkflowCall struct {
	Template catalog.Workflow
	// Catalog has the skills the steps call.
	Catalog *catalog.Catalog
	// Known are the conversation's artifacts by id, which the steps'
	// arguments may name; each step's artifacts join them.
	Known map[string]artifact.Artifact
	// Done are the call's outcomes stored so far (a step's under
	// record.WorkflowStepID): an invocation resumes after them.
	Done map[string]record.CallOutcome
}

// Kind is the kind of source that runs c.
func (c Call) Kind() Kind {
	if c.Workflow != nil {
		return KindWorkflow
	}
	return KindOf(c.Capability)
}

// ReferencedFiles are the artifacts of known whose ids appear among args
// (at any depth), each once: they travel with a call as its Files.
func ReferencedFiles(args map[string]any, known map[string]artifact.Artifact) []artifact.Artifact {
	var files []artifact.Artifact
	seen := map[string]bool{}
	EachString(args, func(s string) {
		if a, ok := known[s]; ok && !seen[s] {
			seen[s] = true
			files = append(files, a)
		}
	})
	return files
}

// EachString calls f with every string in v at any depth of its lists and
// objects (as JSON decodes them, and a map of such objects): where a
// call's arguments may name an artifact.
func EachString(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			EachString(e, f)
		}
	case map[string]any:
		for _, e := range x {
			EachString(e, f)
		}
	case map[string]map[string]any:
		for _, e := range x {
			EachString(e, f)
		}
	}
}

// Lister gives a source's capabilities. A source that is down keeps its
// last good ones, marked Unavailable; the error is for the cache of them
// failing (record.ErrUnavailable).
type Lister interface {
	Capabilities(ctx context.Context) ([]catalog.Capability, error)
}

// Invoker runs one call. It never fails: whatever goes wrong is a failed
// outcome, never a failed turn.
type Invoker interface {
	Invoke(ctx context.Context, c Call) record.CallOutcome
}

// Source is where capabilities come from and where their calls go.
type Source interface {
	Lister
	Invoker
}

// Failure is a call's failure as the source reports it: its text is what
// the model reads, so it says what went wrong in the source's own words.
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

// Failf is a Failure with a formatted message.
func Failf(format string, args ...any) error { return &Failure{fmt.Sprintf(format, args...)} }

// Attempt runs one attempt of c into its outcome, the one shape every
// invoker gives a call: run fills out; an error it returns is a failed
// result in errorText's words (a Failure's own text), with no artifacts or
// question, and a raw payload saying so. status is the outcome's for the
// log ("input_required" for a question).
func Attempt(c Call, run func(out *record.CallOutcome) error, errorText func(error) string) (out record.CallOutcome, status string) {
	out = record.CallOutcome{CallID: c.CallID, Tool: c.Capability.Tool, StartedAt: time.Now().UTC()}
	if err := run(&out); err != nil {
		out.Result = record.ToolResult{Status: record.ResultFailed, Error: errorText(err)}
		out.Artifacts, out.InputRequired = nil, nil
		out.Raw = CapRaw(MustJSON(map[string]any{"status": record.ResultFailed, "error": out.Result.Error}))
	}
	out.EndedAt = time.Now().UTC()
	status = out.Result.Status
	if out.InputRequired != nil {
		status = "input_required"
	}
	return out, status
}

// Discard deletes the files a call stored before it failed: the call fails
// whole, and its files would be in no catalog. It runs whatever ctx's
// cancellation; a file it cannot delete is logged.
func Discard(ctx context.Context, store artifact.Store, c Call, stored []artifact.Artifact, log *slog.Logger) {
	for _, a := range stored {
		if err := store.Delete(context.WithoutCancel(ctx), c.ConversationID, a.ID); err != nil {
			log.WarnContext(ctx, "delete a failed call's file", "conversation_id", c.ConversationID, "artifact_id", a.ID, "error", err)
		}
	}
}

// MaxRaw caps CallOutcome.Raw; a larger raw result is replaced by a
// truncation note carrying its head.
const MaxRaw = 256 << 10

// CapRaw keeps raw within MaxRaw while staying valid JSON: a larger value
// becomes {"truncated":true,"size":n,"head":"<prefix>"}.
func CapRaw(raw []byte) json.RawMessage {
	if len(raw) <= MaxRaw {
		return raw
	}
	head := raw[:MaxRaw-1024]
	for {
		for len(head) > 0 && !utf8.Valid(head) {
			head = head[:len(head)-1]
		}
		b := MustJSON(map[string]any{"truncated": true, "size": len(raw), "head": string(head)})
		if len(b) <= MaxRaw {
			return b
		}
		head = head[:len(head)*3/4]
	}
}

// SnippetLimit is how much of a source's error body reaches the model.
const SnippetLimit = 500

// Snippet is the first SnippetLimit bytes of b as valid UTF-8 with
// whitespace runs collapsed, so an HTML error page stays readable.
func Snippet(b []byte) string {
	if len(b) > SnippetLimit {
		b = b[:SnippetLimit]
	}
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "(empty body)"
	}
	return s
}

// MustJSON is v as JSON, or a note of why it could not be encoded: a raw
// payload is never lost to an encoding error.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"unencodable": err.Error()})
	}
	return b
}
