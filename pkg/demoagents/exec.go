package demoagents

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/clientagent/clientagent/pkg/agents/netguard"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/schemacheck"
)

// skill is one demo agent with its only skill.
type skill struct {
	path             string
	agentName        string
	agentDescription string
	id, name         string
	description      string
	tags, examples   []string
	outputModes      []string
	ext              catalog.SkillExtension
	schema           *schemacheck.Schema
	run              func(ctx context.Context, in *callInput) (*callOutput, error)
}

// callInput is what a skill receives: the merged arguments and access to
// the files the caller attached.
type callInput struct {
	args      map[string]any
	sources   map[string]string // inputSources from message metadata
	taskID    string
	messageID string // the orchestrator's call id
	files     []*a2a.FilePart
	fetch     func(ctx context.Context, artifactID string) (*inputFile, error)
}

// inputFile is a fetched input artifact.
type inputFile struct {
	artifactID string
	name       string
	mimeType   string
	data       []byte
}

// callOutput is a skill's result.
type callOutput struct {
	summary string
	files   []outputFile
	data    map[string]any
	// inputRequired, when set, pauses the task for the fields it names.
	inputRequired *inputRequest
}

type outputFile struct {
	name, mimeType, description string
	data                        []byte
}

type inputRequest struct {
	message string
	fields  []catalog.FormField
}

// userError is a failure whose message is meant for the model and the
// user (bad arguments, unusable input); anything else is reported as an
// internal failure of the agent.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func userErrorf(format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...)}
}

// executor adapts a skill to a2asrv.AgentExecutor.
type executor struct {
	skill *skill
	opts  Options
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

// Execute runs the skill for the request's message and writes exactly one
// final status: completed (with artifacts), input-required or failed.
func (e *executor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	start := time.Now()
	log := e.opts.Logger.With("agent", e.skill.path, "skill", e.skill.id, "task_id", string(reqCtx.TaskID))
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return fmt.Errorf("write working status: %w", err)
	}
	in, err := e.input(reqCtx)
	var out *callOutput
	if err == nil {
		out, err = e.skill.run(ctx, in)
	}
	if err != nil {
		msg := "internal error in " + e.skill.id
		var ue *userError
		if errors.As(err, &ue) {
			msg = ue.msg
		}
		log.Warn("task failed", "error", err.Error(), "ms", time.Since(start).Milliseconds())
		return e.final(ctx, reqCtx, q, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: msg}))
	}
	if ir := out.inputRequired; ir != nil {
		fields := make([]any, 0, len(ir.fields))
		for _, f := range ir.fields {
			fields = append(fields, toAny(f))
		}
		msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx,
			a2a.TextPart{Text: ir.message},
			a2a.DataPart{Data: map[string]any{"fields": fields}})
		log.Info("task needs input", "ms", time.Since(start).Milliseconds())
		return e.final(ctx, reqCtx, q, a2a.TaskStateInputRequired, msg)
	}
	for _, f := range out.files {
		ev := a2a.NewArtifactEvent(reqCtx, a2a.FilePart{File: a2a.FileBytes{
			FileMeta: a2a.FileMeta{Name: f.name, MimeType: f.mimeType},
			Bytes:    base64.StdEncoding.EncodeToString(f.data),
		}})
		ev.Artifact.Name = f.name
		ev.Artifact.Description = f.description
		ev.LastChunk = true
		if err := q.Write(ctx, ev); err != nil {
			return fmt.Errorf("write artifact %s: %w", f.name, err)
		}
	}
	parts := a2a.ContentParts{a2a.TextPart{Text: out.summary}}
	if out.data != nil {
		parts = append(parts, a2a.DataPart{Data: out.data})
	}
	log.Info("task completed", "files", len(out.files), "ms", time.Since(start).Milliseconds())
	return e.final(ctx, reqCtx, q, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, parts...))
}

func (e *executor) final(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, state a2a.TaskState, msg *a2a.Message) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, state, msg)
	ev.Final = true
	if err := q.Write(ctx, ev); err != nil {
		return fmt.Errorf("write %s status: %w", state, err)
	}
	return nil
}

// Cancel marks the task canceled; the skills are short and not interrupted.
func (e *executor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	if err := q.Write(ctx, ev); err != nil {
		return fmt.Errorf("write canceled status: %w", err)
	}
	return nil
}

// input assembles the call's arguments. A message that continues a task
// (after input-required) carries only the new values, or the new values
// merged over the old: either way they are merged over the arguments of
// the task's earlier messages, which the server keeps in the task history.
func (e *executor) input(reqCtx *a2asrv.RequestContext) (*callInput, error) {
	msgs := []*a2a.Message{}
	if reqCtx.StoredTask != nil {
		for _, m := range reqCtx.StoredTask.History {
			// The server appends the current message to the history; skip it
			// by identity, since a caller may reuse its call id as message id.
			if m != nil && m.Role == a2a.MessageRoleUser && m != reqCtx.Message {
				msgs = append(msgs, m)
			}
		}
	}
	msgs = append(msgs, reqCtx.Message)

	in := &callInput{args: map[string]any{}, sources: map[string]string{}, taskID: string(reqCtx.TaskID), messageID: reqCtx.Message.ID}
	for _, m := range msgs {
		args, err := messageArgs(m)
		if err != nil {
			return nil, err
		}
		maps.Copy(in.args, args)
		if src, ok := m.Metadata["inputSources"].(map[string]any); ok {
			for k, v := range src {
				if s, ok := v.(string); ok {
					in.sources[k] = s
				}
			}
		}
		for _, p := range m.Parts {
			switch fp := p.(type) {
			case a2a.FilePart:
				in.files = append(in.files, &fp)
			case *a2a.FilePart:
				in.files = append(in.files, fp)
			}
		}
	}
	if err := e.skill.schema.Validate(in.args); err != nil {
		return nil, userErrorf("invalid arguments for %s: %s", e.skill.id, batch.DescribeValidation(err))
	}
	in.fetch = func(ctx context.Context, id string) (*inputFile, error) { return e.fetch(ctx, in.files, id) }
	return in, nil
}

// messageArgs reads the arguments object of one message: its first
// DataPart, or a TextPart holding a JSON object, or plain text as
// {"input": text} (how a plain A2A client talks).
func messageArgs(m *a2a.Message) (map[string]any, error) {
	var text []string
	for _, p := range m.Parts {
		switch v := p.(type) {
		case a2a.DataPart:
			return v.Data, nil
		case *a2a.DataPart:
			return v.Data, nil
		case a2a.TextPart:
			text = append(text, v.Text)
		case *a2a.TextPart:
			text = append(text, v.Text)
		}
	}
	joined := strings.TrimSpace(strings.Join(text, "\n"))
	if joined == "" {
		return map[string]any{}, nil
	}
	var obj map[string]any
	if strings.HasPrefix(joined, "{") && json.Unmarshal([]byte(joined), &obj) == nil {
		return obj, nil
	}
	return map[string]any{"input": joined}, nil
}

// fetch finds the FilePart for artifact id (part metadata artifact_id,
// else a file named id, else the only file) and returns its bytes, from
// the URI or inline.
func (e *executor) fetch(ctx context.Context, files []*a2a.FilePart, id string) (*inputFile, error) {
	var match *a2a.FilePart
	for _, f := range files {
		if aid, _ := f.Metadata["artifact_id"].(string); aid == id {
			match = f
			break
		}
	}
	if match == nil {
		for _, f := range files {
			if fileMeta(f).Name == id {
				match = f
				break
			}
		}
	}
	if match == nil && len(files) == 1 {
		match = files[0]
	}
	if match == nil {
		return nil, userErrorf("artifact %s was not attached to the request; pass the artifact_id of an existing conversation artifact", id)
	}
	meta := fileMeta(match)
	out := &inputFile{artifactID: id, name: meta.Name, mimeType: meta.MimeType}
	switch c := match.File.(type) {
	case a2a.FileBytes:
		b, err := base64.StdEncoding.DecodeString(c.Bytes)
		if err != nil {
			return nil, userErrorf("artifact %s: inline bytes are not valid base64", id)
		}
		out.data = b
	case a2a.FileURI:
		b, err := e.download(ctx, c.URI)
		if err != nil {
			return nil, err
		}
		out.data = b
	default:
		return nil, userErrorf("artifact %s: unsupported file part", id)
	}
	return out, nil
}

func fileMeta(f *a2a.FilePart) a2a.FileMeta {
	switch c := f.File.(type) {
	case a2a.FileBytes:
		return c.FileMeta
	case a2a.FileURI:
		return c.FileMeta
	}
	return a2a.FileMeta{}
}

// download GETs uri with a deadline and a size limit. Errors name the
// status, never the (signed) URL.
func (e *executor) download(ctx context.Context, uri string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := netguard.CheckURL(uri, e.opts.FetchOrigins...); err != nil {
		return nil, userErrorf("the input file URI is not allowed: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, userErrorf("the input file URI is not a valid URL")
	}
	resp, err := e.opts.HTTPClient.Do(req)
	if errors.Is(err, netguard.ErrNotPublic) {
		return nil, userErrorf("the input file is not on a public address (checked after DNS and redirects)")
	}
	if err != nil {
		return nil, fmt.Errorf("fetch input file: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, userErrorf("could not fetch the input file: HTTP %d (the link may have expired)", resp.StatusCode)
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, e.opts.MaxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read input file: %w", err)
	}
	if n > e.opts.MaxInputBytes {
		return nil, userErrorf("the input file is larger than %d bytes", e.opts.MaxInputBytes)
	}
	return buf.Bytes(), nil
}

// toAny converts v to its JSON-shaped form (maps, slices, float64), which
// is what DataPart.Data must hold to survive a round trip unchanged.
func toAny(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// compileSchema compiles a skill's input schema; a bad literal is a
// programming error.
func compileSchema(id string, raw json.RawMessage) *schemacheck.Schema {
	s, err := schemacheck.Compile("mem://"+id+".json", raw)
	if err != nil {
		panic(fmt.Sprintf("schema %s: %v", id, err))
	}
	return s
}

// Argument accessors; the schema has been validated, so types hold.

func argString(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}

func argNumber(args map[string]any, k string) (float64, bool) {
	switch v := args[k].(type) {
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case int:
		return float64(v), true
	}
	return 0, false
}
