package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// maxFileBytes bounds one file a tool returns.
const maxFileBytes = 512 << 20

// InvokerOptions configures an Invoker.
type InvokerOptions struct {
	Servers []ServerConfig
	// Artifacts stores the images, audio and resources tools return.
	Artifacts artifact.Store
	// HTTPClient carries streamable HTTP sessions (default a new client).
	HTTPClient *http.Client
	// Timeout bounds one call, connection included (default 5 minutes).
	Timeout time.Duration
	Logger  *slog.Logger
	// NewID returns a new artifact id (default: artifact.CallOutputID, the
	// same for every run of a call).
	NewID func() string
}

// Invoker runs calls of MCP tools, each in a session of its own (the
// tool.Invoker of tool.KindMCP). It is safe for concurrent use.
type Invoker struct {
	servers map[string]ServerConfig
	store   artifact.Store
	hc      *http.Client
	timeout time.Duration
	log     *slog.Logger
	newID   func() string
}

// NewInvoker returns an Invoker.
func NewInvoker(opts InvokerOptions) *Invoker {
	i := &Invoker{servers: map[string]ServerConfig{}, store: opts.Artifacts, hc: opts.HTTPClient, timeout: opts.Timeout,
		log: opts.Logger, newID: opts.NewID}
	for _, s := range opts.Servers {
		i.servers[s.Name] = s
	}
	if i.timeout <= 0 {
		i.timeout = 5 * time.Minute
	}
	if i.log == nil {
		i.log = slog.Default()
	}
	return i
}

// Invoke runs c, a call of an MCP tool (Capability.MCPServer set): it opens
// a session to its server, calls the tool and maps the result: text content
// is the Summary, structuredContent the Result, images, audio and
// resources are stored as artifacts, isError is a failed result, and so is
// anything that goes wrong on the way (a server down, a timeout). A server
// that elicits input pauses the call: InputRequired carries its form (see
// elicitationTask). Invoke never fails the turn.
func (i *Invoker) Invoke(ctx context.Context, c tool.Call) record.CallOutcome {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	out, status := tool.Attempt(c, func(out *record.CallOutcome) error { return i.invoke(ctx, c, out) },
		func(err error) string { return i.errorText(err, c) })
	i.log.InfoContext(ctx, "MCP tool call", "conversation_id", c.ConversationID, "turn_id", c.TurnID, "call_id", c.CallID,
		"tool", c.Capability.Tool, "server", c.Capability.MCPServer, "status", status, "artifacts", len(out.Artifacts),
		"ms", out.EndedAt.Sub(out.StartedAt).Milliseconds(), "error", out.Result.Error)
	return out
}

func (i *Invoker) invoke(ctx context.Context, c tool.Call, out *record.CallOutcome) error {
	sc, ok := i.servers[c.Capability.MCPServer]
	if !ok {
		return tool.Failf("MCP server %s is no longer configured", c.Capability.MCPServer)
	}
	if sc.Unusable != nil {
		return tool.Failf("MCP server %s is not configured: %v", sc.Name, sc.Unusable)
	}
	callCtx, endAttempt := context.WithCancel(ctx)
	defer endAttempt()
	el := newElicitor(c, endAttempt)
	cs, err := connect(callCtx, sc, i.hc, &sdk.ClientOptions{ElicitationHandler: el.handle}, false)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return tool.Failf("MCP server %s is unreachable: %v", sc.Name, rootCause(err))
	}
	defer cs.Close()
	res, err := cs.CallTool(callCtx, &sdk.CallToolParams{Name: c.Capability.SkillID, Arguments: toolArguments(c, el.toolProps)})
	if ir := el.pause(); ir != nil {
		out.InputRequired = ir
		out.Raw = tool.CapRaw(tool.MustJSON(map[string]any{"status": "input_required", "message": ir.Message, "fields": ir.Fields}))
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return tool.Failf("MCP server %s: %v", sc.Name, rootCause(err))
	}
	return i.result(ctx, cs, c, res, out)
}

// toolArguments are the call's arguments less the answers to the server's
// elicitations, which are not the tool's parameters.
func toolArguments(c tool.Call, toolProps map[string]bool) map[string]any {
	args := map[string]any{}
	for k, v := range c.Arguments {
		if c.Continue != nil && c.Sources[k] == "user" && !toolProps[k] {
			continue
		}
		args[k] = v
	}
	return args
}

// result maps a tool's result onto the outcome.
func (i *Invoker) result(ctx context.Context, cs *sdk.ClientSession, c tool.Call, res *sdk.CallToolResult, out *record.CallOutcome) error {
	var texts, notes []string
	var stored []artifact.Artifact
	n := 0
	keep := func(name, mimeType, desc string, body []byte) error {
		n++
		a, err := i.keep(ctx, c, n, name, mimeType, desc, body)
		if err != nil {
			return err
		}
		stored = append(stored, a)
		return nil
	}
	for _, content := range res.Content {
		var err error
		switch x := content.(type) {
		case *sdk.TextContent:
			if strings.TrimSpace(x.Text) != "" {
				texts = append(texts, x.Text)
			}
		case *sdk.ImageContent:
			err = keep("", x.MIMEType, "", x.Data)
		case *sdk.AudioContent:
			err = keep("", x.MIMEType, "", x.Data)
		case *sdk.EmbeddedResource:
			if r := x.Resource; r != nil {
				err = keep(resourceName(r.URI), r.MIMEType, "", resourceBytes(r))
			}
		case *sdk.ResourceLink:
			rr, rerr := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: x.URI})
			if rerr != nil || len(rr.Contents) == 0 {
				notes = append(notes, fmt.Sprintf("Linked resource %s could not be read: %v", x.URI, rerr))
				continue
			}
			r := rr.Contents[0]
			name := x.Name
			if name == "" || path.Ext(name) == "" {
				name = resourceName(x.URI)
			}
			mt := r.MIMEType
			if mt == "" {
				mt = x.MIMEType
			}
			desc := x.Description
			if desc == "" {
				desc = x.Title
			}
			err = keep(name, mt, desc, resourceBytes(r))
		}
		if err != nil {
			// The call fails whole: files kept before this one would be in
			// no catalog.
			tool.Discard(ctx, i.store, c, stored, i.log)
			return err
		}
	}
	summary := strings.Join(append(texts, notes...), "\n\n")
	if res.IsError {
		msg := summary
		if msg == "" {
			msg = "the tool reported an error without a message"
		}
		out.Artifacts = stored
		out.Result = record.ToolResult{Status: record.ResultFailed, Error: msg}
		out.Raw = tool.CapRaw(tool.MustJSON(map[string]any{"status": record.ResultFailed, "error": msg}))
		return nil
	}
	r := record.ToolResult{Status: record.ResultSucceeded, Summary: summary}
	raw := map[string]any{"status": record.ResultSucceeded}
	if summary != "" {
		raw["summary"] = summary
	}
	if res.StructuredContent != nil {
		r.Result = string(tool.MustJSON(res.StructuredContent))
		raw["result"] = res.StructuredContent
	}
	for _, a := range stored {
		r.Artifacts = append(r.Artifacts, a.Ref())
	}
	if len(r.Artifacts) > 0 {
		raw["artifacts"] = r.Artifacts
	}
	out.Result = r
	out.Artifacts = stored
	out.Raw = tool.CapRaw(tool.MustJSON(raw))
	return nil
}

// keep stores one returned file under a new artifact id.
func (i *Invoker) keep(ctx context.Context, c tool.Call, n int, name, mimeType, desc string, body []byte) (artifact.Artifact, error) {
	if i.store == nil {
		return artifact.Artifact{}, errors.New("no artifact store configured to keep returned files")
	}
	if len(body) > maxFileBytes {
		return artifact.Artifact{}, tool.Failf("the tool returned a file larger than %d MiB", maxFileBytes>>20)
	}
	if mt, _, err := mime.ParseMediaType(mimeType); err == nil {
		mimeType = mt
	} else {
		mimeType = "application/octet-stream"
	}
	if name == "" {
		name = fmt.Sprintf("%s-%d%s", c.Capability.Tool, n, artifact.ExtensionFor(mimeType))
	}
	id := artifact.CallOutputID(c.CallID, n)
	if i.newID != nil {
		id = i.newID()
	}
	a := artifact.Artifact{ID: id, Name: name, MimeType: mimeType, Description: desc, CallID: c.CallID, TurnID: c.TurnID,
		CreatedAt: time.Now().UTC()}
	size, err := i.store.Put(ctx, c.ConversationID, a.ID, a.MimeType, bytes.NewReader(body))
	var qe *artifact.QuotaError
	if errors.As(err, &qe) {
		return artifact.Artifact{}, tool.Failf("file %q the tool returned does not fit: %v; nothing was stored", a.Name, qe)
	}
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("store file %q: %w", a.Name, err)
	}
	a.Size = size
	return a, nil
}

func resourceBytes(r *sdk.ResourceContents) []byte {
	if r.Blob != nil {
		return r.Blob
	}
	return []byte(r.Text)
}

// resourceName is the last segment of a resource URI, or "resource".
func resourceName(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		p := u.Path
		if p == "" {
			p = u.Opaque
		}
		if b := path.Base(p); b != "." && b != "/" && b != "" {
			return b
		}
		if u.Host != "" {
			return u.Host
		}
	}
	return "resource"
}

// errorText is the Result.Error of a failed call.
func (i *Invoker) errorText(err error, c tool.Call) string {
	var f *tool.Failure
	switch {
	case errors.As(err, &f):
		return f.Msg
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("MCP server %s did not answer within %s", c.Capability.MCPServer, i.timeout)
	case errors.Is(err, context.Canceled):
		return "the call was canceled before the MCP server answered"
	default:
		return err.Error()
	}
}

// rootCause is the innermost error, without the SDK's wrapping prefixes.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
