package a2acall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clientagent/clientagent/pkg/agents/files"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/keepalive"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// InvokerOptions configures an Invoker.
type InvokerOptions struct {
	// Artifacts stores the files specialists return and signs the URLs of
	// the files we send them.
	Artifacts artifact.Store
	// HTTPClient carries A2A calls and file downloads (default a new client).
	// Its Transport is wrapped, not replaced.
	HTTPClient *http.Client
	// Timeout is the deadline of one invocation, file copies included
	// (default 5 minutes).
	Timeout time.Duration
	// FileURLTTL is how long a URL handed to a specialist stays valid
	// (default 1 hour).
	FileURLTTL time.Duration
	Logger     *slog.Logger
	// NewID returns a new artifact id (default: artifact.CallOutputID, the
	// same for every run of a call).
	NewID func() string
	// A file a specialist returns by URL is downloaded only from a public
	// address, checked on the address actually dialled (DNS names and
	// redirects included, pkg/agents/files), so an agent cannot make the
	// platform read its own network. FileOrigins allows exact origins
	// (scheme://host:port) beside the public internet: the local stack's
	// own URL. AllowPrivateFiles turns the check off (specialists that
	// serve their files on a private network, by explicit configuration).
	FileOrigins       []string
	AllowPrivateFiles bool
	// PublicFilesOnly is the former switch of the check, which is now
	// always on unless AllowPrivateFiles; it is ignored.
	//
	// Deprecated: the check is the default; see AllowPrivateFiles.
	PublicFilesOnly bool
	// PollInterval is the first wait between tasks/get polls of a task that
	// is still working after the blocking send (default 500ms, doubling to 5s).
	PollInterval time.Duration
	// Files bounds each returned file: size, deadline and minimum rate.
	Files files.Limits
}

// Invoker sends calls to specialists over A2A (docs/design.md §5): the
// tool.Invoker of tool.KindA2A. It is safe for concurrent use.
type Invoker struct {
	store      artifact.Store
	hc         *http.Client
	files      *files.Fetcher // downloads of files agents return by URL, never with hc
	timeout    time.Duration
	fileURLTTL time.Duration
	log        *slog.Logger
	newID      func() string
	poll       time.Duration
}

var _ tool.Invoker = (*Invoker)(nil)

// NewInvoker returns an Invoker.
func NewInvoker(opts InvokerOptions) *Invoker {
	base := opts.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	hc := *base
	rt := hc.Transport
	if rt == nil {
		rt = keepalive.Transport
	}
	hc.Transport = captureTransport{base: rt}
	i := &Invoker{
		store:      opts.Artifacts,
		hc:         &hc,
		files:      files.NewFetcher(files.Options{Origins: opts.FileOrigins, AllowPrivate: opts.AllowPrivateFiles, Limits: opts.Files}),
		timeout:    opts.Timeout,
		fileURLTTL: opts.FileURLTTL,
		log:        opts.Logger,
		newID:      opts.NewID,
		poll:       opts.PollInterval,
	}
	if i.timeout <= 0 {
		i.timeout = 5 * time.Minute
	}
	if i.fileURLTTL <= 0 {
		i.fileURLTTL = time.Hour
	}
	if i.log == nil {
		i.log = slog.Default()
	}
	if i.poll <= 0 {
		i.poll = 500 * time.Millisecond
	}
	return i
}

// Invoke sends c to its specialist with a blocking message/send and maps
// the answer onto an outcome: a completed task (or a plain message) is
// "succeeded" with its text as Summary, its data as Result and its files
// copied into the artifact store; input-required sets InputRequired and
// leaves Result.Status empty; anything else — failed, rejected or canceled
// tasks, JSON-RPC errors, HTTP errors, timeouts — is "failed" with the
// agent's own words in Result.Error. Invoke never fails the turn.
func (i *Invoker) Invoke(ctx context.Context, c tool.Call) record.CallOutcome {
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	out, status := tool.Attempt(c, func(out *record.CallOutcome) error { return i.invoke(ctx, c, out) }, i.errorText)
	i.log.InfoContext(ctx, "specialist call", "conversation_id", c.ConversationID, "turn_id", c.TurnID, "call_id", c.CallID,
		"tool", c.Capability.Tool, "agent", c.Capability.AgentURL, "status", status, "artifacts", len(out.Artifacts),
		"ms", out.EndedAt.Sub(out.StartedAt).Milliseconds(), "error", out.Result.Error)
	return out
}

func (i *Invoker) invoke(ctx context.Context, c tool.Call, out *record.CallOutcome) error {
	msg, err := i.message(ctx, c)
	if err != nil {
		return err
	}
	iface := a2a.AgentInterface{Transport: a2a.TransportProtocolJSONRPC, URL: c.Capability.AgentURL}
	opts := []a2aclient.FactoryOption{a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(i.hc)}
	if c.Capability.Transport == string(a2a.TransportProtocolGRPC) {
		target, creds := grpcTarget(c.Capability.AgentURL)
		iface = a2a.AgentInterface{Transport: a2a.TransportProtocolGRPC, URL: target}
		opts = append(opts, a2aclient.WithGRPCTransport(grpc.WithTransportCredentials(creds)))
	}
	client, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{iface}, opts...)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", c.Capability.AgentURL, err)
	}
	defer client.Destroy()

	blocking := true
	sendCtx, capture := withCapture(ctx)
	res, err := client.SendMessage(sendCtx, &a2a.MessageSendParams{
		Config:  &a2a.MessageSendConfig{Blocking: &blocking},
		Message: msg,
	})
	if err != nil {
		return i.transportError(ctx, err, capture)
	}
	switch r := res.(type) {
	case *a2a.Message:
		return i.completed(ctx, c, out, r.Parts, nil)
	case *a2a.Task:
		task, err := i.awaitTask(ctx, client, r)
		if err != nil {
			return err
		}
		return i.taskOutcome(ctx, c, out, task)
	default:
		return tool.Failf("agent answered with an unexpected result type %T", res)
	}
}

// grpcTarget turns a card's gRPC URL into a dial target and its transport
// security: TLS with the system's roots, except for an http:// URL (a
// local or in-VPC agent without TLS).
func grpcTarget(u string) (string, credentials.TransportCredentials) {
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return strings.TrimRight(rest, "/"), insecure.NewCredentials()
	}
	for _, scheme := range []string{"https://", "grpcs://"} {
		u = strings.TrimPrefix(u, scheme)
	}
	return strings.TrimRight(u, "/"), credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
}

// message builds the A2A message of a call.
func (i *Invoker) message(ctx context.Context, c tool.Call) (*a2a.Message, error) {
	var parts []a2a.Part
	if c.Capability.Plain {
		text := plainInput(c.Arguments)
		if c.Continue != nil {
			// The answer to the agent's question is what the user supplied
			// after the call was made; the original input it already has.
			if reply := userReply(c.Arguments, c.Sources); reply != "" {
				text = reply
			}
		}
		parts = append(parts, a2a.TextPart{Text: text})
	} else {
		args := c.Arguments
		if args == nil {
			args = map[string]any{}
		}
		parts = append(parts, a2a.DataPart{Data: args})
	}
	for _, f := range c.Files {
		if i.store == nil {
			return nil, errors.New("no artifact store configured to send files")
		}
		u, err := i.store.URL(ctx, c.ConversationID, f.ID, i.fileURLTTL)
		if err != nil {
			return nil, fmt.Errorf("sign URL of artifact %s: %w", f.ID, err)
		}
		parts = append(parts, a2a.FilePart{
			File:     a2a.FileURI{FileMeta: a2a.FileMeta{Name: f.Name, MimeType: f.MimeType}, URI: u},
			Metadata: map[string]any{"artifact_id": f.ID},
		})
	}
	sources := c.Sources
	if sources == nil {
		sources = map[string]string{}
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	msg.ID = c.CallID
	// skillId is ours, beyond the brief's inputSources: an A2A message does
	// not name the skill, and a multi-skill agent may need it to route.
	// map[string]any, not map[string]string: gRPC carries metadata as a
	// protobuf Struct, which only takes JSON-shaped Go values.
	srcs := make(map[string]any, len(sources))
	for k, v := range sources {
		srcs[k] = v
	}
	msg.Metadata = map[string]any{"inputSources": srcs, "skillId": c.Capability.SkillID}
	if c.Continue != nil {
		msg.TaskID = a2a.TaskID(c.Continue.TaskID)
		msg.ContextID = c.Continue.ContextID
		// The first message of the call already used the call id; the
		// answer gets an id derived from it and its arguments, so a retried
		// answer is still recognisable but distinct from the first message.
		sum := sha256.Sum256(tool.MustJSON(c.Arguments))
		msg.ID = c.CallID + "-" + hex.EncodeToString(sum[:4])
	}
	if msg.ID == "" {
		msg.ID = a2a.NewMessageID()
	}
	return msg, nil
}

// userReply is the text of the values the user supplied (input source
// "user"): the value alone when there is one, else "name: value" lines.
func userReply(args map[string]any, sources map[string]string) string {
	var names []string
	for k, src := range sources {
		if src == "user" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	str := func(v any) string {
		if s, ok := v.(string); ok {
			return s
		}
		return string(tool.MustJSON(v))
	}
	if len(names) == 1 {
		return str(args[names[0]])
	}
	lines := make([]string, 0, len(names))
	for _, k := range names {
		lines = append(lines, k+": "+str(args[k]))
	}
	return strings.Join(lines, "\n")
}

// plainInput is the text sent to a plain skill: its "input" argument, or
// the arguments as JSON when the model sent something else.
func plainInput(args map[string]any) string {
	if s, ok := args["input"].(string); ok {
		return s
	}
	if len(args) == 0 {
		return ""
	}
	return string(tool.MustJSON(args))
}

// awaitTask polls a task that is not yet terminal after the blocking send
// (an agent may answer early with "working") until it settles or the
// invocation deadline passes.
func (i *Invoker) awaitTask(ctx context.Context, client *a2aclient.Client, task *a2a.Task) (*a2a.Task, error) {
	wait := i.poll
	for !settled(task.Status.State) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
		pollCtx, capture := withCapture(ctx)
		t, err := client.GetTask(pollCtx, &a2a.TaskQueryParams{ID: task.ID})
		if err != nil {
			return nil, i.transportError(ctx, err, capture)
		}
		task = t
	}
	return task, nil
}

func settled(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

func (i *Invoker) taskOutcome(ctx context.Context, c tool.Call, out *record.CallOutcome, task *a2a.Task) error {
	var statusParts []a2a.Part
	if task.Status.Message != nil {
		statusParts = task.Status.Message.Parts
	}
	switch task.Status.State {
	case a2a.TaskStateCompleted:
		return i.completed(ctx, c, out, statusParts, task.Artifacts)
	case a2a.TaskStateInputRequired:
		out.InputRequired = inputRequired(task, statusParts)
		out.Raw = tool.CapRaw(tool.MustJSON(map[string]any{"status": "input_required", "message": out.InputRequired.Message,
			"fields": out.InputRequired.Fields, "task": out.InputRequired.Task}))
		return nil
	default:
		text := joinTexts(statusParts)
		if text == "" {
			text = joinTexts(artifactParts(task.Artifacts))
		}
		if text == "" {
			text = "no message given"
		}
		switch task.Status.State {
		case a2a.TaskStateAuthRequired:
			return tool.Failf("agent requires authentication: %s", text)
		case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateCanceled:
			return tool.Failf("agent reported task %s: %s", task.Status.State, text)
		default:
			return tool.Failf("agent left the task in state %q: %s", task.Status.State, text)
		}
	}
}

// inputRequired reads the specialist's question. Fields come from a data
// part {"fields":[…]}; without one the user gets one free-text field.
func inputRequired(task *a2a.Task, parts []a2a.Part) *record.InputRequired {
	ir := &record.InputRequired{
		Message: joinTexts(parts),
		Task:    record.A2ATask{TaskID: string(task.ID), ContextID: task.ContextID},
	}
	for _, p := range parts {
		d, ok := asData(p)
		if !ok {
			continue
		}
		raw, ok := d["fields"]
		if !ok {
			continue
		}
		var fields []catalog.FormField
		if json.Unmarshal(tool.MustJSON(raw), &fields) != nil {
			continue
		}
		for _, f := range fields {
			if f.Name == "" {
				continue
			}
			if f.Type == "" {
				f.Type = "string"
			}
			ir.Fields = append(ir.Fields, f)
		}
		if len(ir.Fields) > 0 {
			break
		}
	}
	if len(ir.Fields) == 0 {
		desc := ir.Message
		if desc == "" {
			desc = "Your answer to the agent's question."
		}
		ir.Fields = []catalog.FormField{{Name: "answer", Type: "string", Description: desc, Required: true}}
	}
	return ir
}

// completed fills a succeeded outcome from the status (or response message)
// parts and the task's artifacts, copying their files into our store.
func (i *Invoker) completed(ctx context.Context, c tool.Call, out *record.CallOutcome, msgParts []a2a.Part, arts []*a2a.Artifact) error {
	var texts []string
	var data []any
	collect := func(parts []a2a.Part) {
		for _, p := range parts {
			if t, ok := asText(p); ok && strings.TrimSpace(t) != "" {
				texts = append(texts, t)
			}
			if d, ok := asData(p); ok {
				data = append(data, d)
			}
		}
	}
	collect(msgParts)
	for _, a := range arts {
		if a != nil {
			collect(a.Parts)
		}
	}

	var stored []artifact.Artifact
	fileParts := filesOf(msgParts, nil)
	for _, a := range arts {
		if a != nil {
			fileParts = append(fileParts, filesOf(a.Parts, a)...)
		}
	}
	for n, fp := range fileParts {
		a, err := i.copyFile(ctx, c, fp, n)
		if err != nil {
			// The call fails whole: the files copied before this one would
			// be in no catalog, so they go too.
			tool.Discard(ctx, i.store, c, stored, i.log)
			return err
		}
		stored = append(stored, a)
	}

	res := record.ToolResult{Status: record.ResultSucceeded, Summary: strings.Join(texts, "\n\n")}
	var result any
	switch len(data) {
	case 0:
	case 1:
		result = data[0]
	default:
		result = data
	}
	if result != nil {
		res.Result = string(tool.MustJSON(result))
	}
	refs := make([]artifact.Ref, 0, len(stored))
	for _, a := range stored {
		refs = append(refs, a.Ref())
	}
	if len(refs) > 0 {
		res.Artifacts = refs
	}
	out.Result = res
	out.Artifacts = stored
	raw := map[string]any{"status": record.ResultSucceeded}
	if res.Summary != "" {
		raw["summary"] = res.Summary
	}
	if result != nil {
		raw["result"] = result
	}
	if len(refs) > 0 {
		raw["artifacts"] = refs
	}
	out.Raw = tool.CapRaw(tool.MustJSON(raw))
	return nil
}

// filePart is a file returned by a specialist with the artifact it came in.
type filePart struct {
	part a2a.FilePart
	from *a2a.Artifact
}

func filesOf(parts []a2a.Part, from *a2a.Artifact) []filePart {
	var out []filePart
	for _, p := range parts {
		switch fp := p.(type) {
		case a2a.FilePart:
			out = append(out, filePart{fp, from})
		case *a2a.FilePart:
			if fp != nil {
				out = append(out, filePart{*fp, from})
			}
		}
	}
	return out
}

// copyFile stores one returned file under a new artifact id.
func (i *Invoker) copyFile(ctx context.Context, c tool.Call, fp filePart, n int) (artifact.Artifact, error) {
	if i.store == nil {
		return artifact.Artifact{}, errors.New("no artifact store configured to keep returned files")
	}
	var (
		meta  a2a.FileMeta
		body  io.Reader
		label string
	)
	lim := i.files.Limits()
	var dl *files.Download // set for a file fetched by URL
	switch f := fp.part.File.(type) {
	case a2a.FileBytes:
		meta = f.FileMeta
		b, err := decodeBase64(f.Bytes)
		if err != nil {
			return artifact.Artifact{}, tool.Failf("agent returned file %q with undecodable bytes: %v", f.Name, err)
		}
		body, label = bytes.NewReader(b), f.Name
	case a2a.FileURI:
		meta, label = f.FileMeta, fileLabel(f.Name, f.URI)
		var err error
		if dl, err = i.files.Open(ctx, f.URI); err != nil {
			return artifact.Artifact{}, tool.Failf("fetch file %q the agent returned: %v", label, err)
		}
		defer dl.Close()
		// A declared size is refused before a byte is read.
		if dl.Size > lim.MaxBytes {
			return artifact.Artifact{}, tool.Failf("file %q the agent returned is %s, more than the %s a file may be; nothing was stored",
				label, artifact.FormatBytes(dl.Size), artifact.FormatBytes(lim.MaxBytes))
		}
		if room, ok, err := artifact.Room(ctx, i.store, c.ConversationID); err != nil {
			return artifact.Artifact{}, fmt.Errorf("store file %q: %w", label, err)
		} else if ok && dl.Size > room {
			return artifact.Artifact{}, tool.Failf("file %q the agent returned (%s) does not fit: only %s of the conversation's storage quota is left; nothing was stored",
				label, artifact.FormatBytes(dl.Size), artifact.FormatBytes(room))
		}
		body = dl.Body
		if meta.MimeType == "" {
			meta.MimeType = dl.ContentType
		}
	default:
		return artifact.Artifact{}, tool.Failf("agent returned a file part of unknown form %T", fp.part.File)
	}
	id := artifact.CallOutputID(c.CallID, n)
	if i.newID != nil {
		id = i.newID()
	}
	a := artifact.Artifact{
		ID:        id,
		Name:      meta.Name,
		MimeType:  meta.MimeType,
		CallID:    c.CallID,
		TurnID:    c.TurnID,
		CreatedAt: time.Now().UTC(),
	}
	if fp.from != nil {
		a.Description = fp.from.Description
	}
	if a.MimeType == "" {
		a.MimeType = "application/octet-stream"
	}
	if a.Name == "" && fp.from != nil && fp.from.Name != "" {
		// A file without a name takes its artifact's, with an extension
		// so the user's download opens.
		a.Name = fp.from.Name
		if path.Ext(a.Name) == "" {
			a.Name += artifact.ExtensionFor(a.MimeType)
		}
	}
	if a.Name == "" {
		a.Name = fmt.Sprintf("%s-%d%s", c.Capability.Tool, n+1, artifact.ExtensionFor(a.MimeType))
	}
	if label == "" {
		label = a.Name
	}
	// The store fails the Put, keeping nothing, one byte past the limit:
	// a cut file must never be stored as if it were whole.
	size, err := i.store.Put(ctx, c.ConversationID, a.ID, a.MimeType, artifact.LimitReader(body, lim.MaxBytes, nil))
	var qe *artifact.QuotaError
	switch {
	case err == nil:
	case errors.As(err, &qe):
		return artifact.Artifact{}, tool.Failf("file %q the agent returned does not fit: %v; nothing was stored", label, qe)
	case errors.Is(err, artifact.ErrTooLarge):
		return artifact.Artifact{}, tool.Failf("file %q the agent returned is larger than the %s a file may be; nothing was stored",
			label, artifact.FormatBytes(lim.MaxBytes))
	case dl != nil && dl.Bounded():
		return artifact.Artifact{}, tool.Failf("fetch file %q the agent returned: %v; nothing was stored", label, dl.Cause(err))
	default:
		return artifact.Artifact{}, fmt.Errorf("store file %q: %w", a.Name, err)
	}
	a.Size = size
	return a, nil
}

func fileLabel(name, uri string) string {
	if name != "" {
		return name
	}
	return uri
}

// decodeBase64 accepts standard and URL alphabets, padded or not, since
// agents differ.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var firstErr error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err == nil {
			return b, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// transportError turns an a2a-go error into a failure carrying the agent's
// own words when the captured response has them.
func (i *Invoker) transportError(ctx context.Context, err error, c *httpCapture) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if d := c.describe(); d != "" {
		return &tool.Failure{Msg: d}
	}
	return err
}

// errorText is the Result.Error of a failed call.
func (i *Invoker) errorText(err error) string {
	var f *tool.Failure
	switch {
	case errors.As(err, &f):
		return f.Msg
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the agent did not answer within %s", i.timeout)
	case errors.Is(err, context.Canceled):
		return "the call was canceled before the agent answered"
	default:
		return err.Error()
	}
}

func asText(p a2a.Part) (string, bool) {
	switch t := p.(type) {
	case a2a.TextPart:
		return t.Text, true
	case *a2a.TextPart:
		if t != nil {
			return t.Text, true
		}
	}
	return "", false
}

func asData(p a2a.Part) (map[string]any, bool) {
	switch d := p.(type) {
	case a2a.DataPart:
		return d.Data, true
	case *a2a.DataPart:
		if d != nil {
			return d.Data, true
		}
	}
	return nil, false
}

func joinTexts(parts []a2a.Part) string {
	var texts []string
	for _, p := range parts {
		if t, ok := asText(p); ok && strings.TrimSpace(t) != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n\n")
}

func artifactParts(arts []*a2a.Artifact) []a2a.Part {
	var parts []a2a.Part
	for _, a := range arts {
		if a != nil {
			parts = append(parts, a.Parts...)
		}
	}
	return parts
}
