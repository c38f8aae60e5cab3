package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/gopool"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/turn"
	"github.com/clientagent/clientagent/pkg/turnview"
	"github.com/clientagent/clientagent/pkg/wire"
)

// conversation loads cid for user; someone else's conversation is 404,
// exactly like a missing one.
func (s *Server) conversation(ctx context.Context, user, cid, tid string) (*record.Conversation, map[string]record.CallOutcome, error) {
	conv, outcomes, err := s.Store.Load(ctx, cid, tid)
	return owned(user, cid, conv, outcomes, err)
}

// step loads what one request about cid needs (record.Store.LoadStep): the
// meta and the active turns, and q's turn; never the whole history. It
// checks the owner like conversation.
func (s *Server) step(ctx context.Context, user, cid string, q record.Query) (*record.Conversation, map[string]record.CallOutcome, error) {
	conv, outcomes, err := s.Store.LoadStep(ctx, cid, q)
	return owned(user, cid, conv, outcomes, err)
}

// owned is a load's answer for user: someone else's conversation is 404,
// exactly like a missing one.
func owned(user, cid string, conv *record.Conversation, outcomes map[string]record.CallOutcome, err error) (*record.Conversation, map[string]record.CallOutcome, error) {
	if errors.Is(err, record.ErrNotFound) {
		return nil, nil, errNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, err)
	}
	if conv.Meta.Owner != user {
		return nil, nil, errNotFound
	}
	return conv, outcomes, nil
}

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request, user string) error {
	var body struct {
		Title string `json:"title"`
	}
	if r.ContentLength != 0 {
		// An empty body is fine (a chunked request may be empty too).
		if err := decode(r, 4096, &body); err != nil && !errors.Is(err, errEmptyBody) {
			return err
		}
	}
	if err := checkText("title", body.Title); err != nil {
		return err
	}
	// A title is one line, its white space runs one space (as a rename).
	title := strings.Join(strings.Fields(body.Title), " ")
	m := record.Meta{ID: newID("c_"), Owner: user, CreatedAt: s.now(), UpdatedAt: s.now(), Title: title}
	if err := s.Store.Create(r.Context(), m); err != nil {
		return fmt.Errorf("create conversation: %w", err)
	}
	s.userEvent(r.Context(), user, record.EventConversationCreated, m.ID, map[string]any{"title": m.Title})
	writeJSON(w, http.StatusCreated, map[string]string{"conversation_id": m.ID})
	return nil
}

type conversationSummary struct {
	ID        string `json:"conversation_id"`
	Title     string `json:"title"`
	UpdatedAt string `json:"updated_at"`
	Status    string `json:"status"`
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request, user string) error {
	metas, err := s.Store.List(r.Context(), user)
	if err != nil {
		return fmt.Errorf("list conversations: %w", err)
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if err := checkText("q", q); err != nil {
		return err
	}
	out := make([]conversationSummary, 0, len(metas))
	for i, m := range metas {
		if q != "" {
			found, err := s.matches(r.Context(), m, q, i < maxSearched)
			if err != nil {
				return fmt.Errorf("search conversations: %w", err)
			}
			if !found {
				continue
			}
		}
		out = append(out, summary(m))
	}
	writeJSON(w, http.StatusOK, map[string]any{"conversations": out})
	return nil
}

// maxSearched bounds how many conversations one search reads beyond their
// titles (the newest first), so a search costs at most that many reads.
const maxSearched = 200

// matches reports whether conversation m's title, or a text of its turns
// (the user's messages, the replies, the history's entries), holds q,
// ignoring case. The title is checked first, without a read; deep false
// checks only the title.
func (s *Server) matches(ctx context.Context, m record.Meta, q string, deep bool) (bool, error) {
	q = strings.ToLower(q)
	if strings.Contains(strings.ToLower(m.Title), q) || !deep {
		return strings.Contains(strings.ToLower(m.Title), q), nil
	}
	conv, _, err := s.Store.Load(ctx, m.ID, "")
	if errors.Is(err, record.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	for _, t := range conv.Turns {
		if strings.Contains(strings.ToLower(t.Text), q) || strings.Contains(strings.ToLower(t.FinalReport), q) {
			return true, nil
		}
		for _, e := range t.History {
			if strings.Contains(strings.ToLower(e.Content), q) {
				return true, nil
			}
		}
	}
	return false, nil
}

// summary is a conversation as the list shows it.
func summary(m record.Meta) conversationSummary {
	status := m.Status
	if status == "" {
		status = "idle"
	}
	return conversationSummary{ID: m.ID, Title: m.Title, UpdatedAt: m.UpdatedAt.Format(time.RFC3339Nano), Status: string(status)}
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request, user string) error {
	conv, _, err := s.conversation(r.Context(), user, r.PathValue("cid"), "")
	if err != nil {
		return err
	}
	// Turns with calls still running show each call as the turn's own
	// route does: running, or its stored outcome.
	var busy []string
	for _, t := range conv.Turns {
		if slices.ContainsFunc(t.Pending, func(pc record.PendingCall) bool {
			return pc.State == record.CallRunning || (pc.State == record.CallReady && t.Status == record.StatusRunning)
		}) {
			busy = append(busy, t.ID)
		}
	}
	outcomes, err := s.Store.Outcomes(r.Context(), conv.Meta.ID, busy...)
	if err != nil {
		return fmt.Errorf("read outcomes: %w", err)
	}
	history := []wire.HistoryEntry{}
	turns := []wire.Turn{}
	for _, t := range conv.Turns {
		for _, e := range t.History {
			e.TurnID = t.ID
			history = append(history, e)
		}
		turns = append(turns, s.view(r.Context(), conv, t, outcomes[t.ID]))
	}
	arts := []artifact.Artifact{}
	arts = append(arts, conv.Artifacts...)
	writeJSON(w, http.StatusOK, map[string]any{
		"conversation_id": conv.Meta.ID,
		"title":           conv.Meta.Title,
		"history":         history,
		"artifacts":       arts,
		"turns":           turns,
	})
	return nil
}

func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request, user string) error {
	conv, _, err := s.step(r.Context(), user, r.PathValue("cid"), record.Query{Artifacts: record.NoCatalog})
	if err != nil {
		return err
	}
	for _, t := range conv.Turns {
		if !t.Status.Final() {
			_, _ = s.Executions.StopExecution(r.Context(), &sfn.StopExecutionInput{
				ExecutionArn: aws.String(s.executionARN(t.ID)), Error: aws.String("ConversationDeleted"),
			})
		}
	}
	if err := s.Store.Delete(r.Context(), conv.Meta.ID); err != nil {
		return fmt.Errorf("delete conversation: %w", err)
	}
	s.userEvent(r.Context(), user, record.EventConversationDeleted, conv.Meta.ID, nil)
	if err := s.Artifacts.DeleteConversation(r.Context(), conv.Meta.ID); err != nil {
		s.log().WarnContext(r.Context(), "delete artifacts", "conversation", conv.Meta.ID, "error", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) uploadArtifact(w http.ResponseWriter, r *http.Request, user string) error {
	conv, _, err := s.step(r.Context(), user, r.PathValue("cid"), record.Query{})
	if err != nil {
		return err
	}
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	if err := checkFileName(name); err != nil {
		return err
	}
	mime, err := mediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	if r.ContentLength > s.MaxUpload {
		return errorf(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("uploads are limited to %d bytes", s.MaxUpload))
	}
	// A declared size that does not fit the conversation's quota is
	// refused before a byte is read; an undeclared one fails as it runs over.
	if room, ok, err := artifact.Room(r.Context(), s.Artifacts, conv.Meta.ID); err != nil {
		return fmt.Errorf("upload: %w", err)
	} else if ok && r.ContentLength > room {
		return quotaExceeded(room)
	}
	body := http.MaxBytesReader(w, r.Body, s.MaxUpload)
	id := artifact.NewID()
	size, err := s.Artifacts.Put(r.Context(), conv.Meta.ID, id, mime, body)
	var mbe *http.MaxBytesError
	var qe *artifact.QuotaError
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("uploads are limited to %d bytes", s.MaxUpload))
	case errors.As(err, &qe):
		return quotaExceeded(max(qe.Limit-qe.Used, 0))
	}
	if err != nil {
		return fmt.Errorf("store upload: %w", err)
	}
	a := artifact.Artifact{ID: id, Name: name, MimeType: mime, Size: size, Description: "uploaded by the user", CreatedAt: s.now()}
	if err := s.Store.PutArtifacts(r.Context(), conv.Meta.ID, a); err != nil {
		return fmt.Errorf("catalog upload: %w", err)
	}
	writeJSON(w, http.StatusCreated, map[string]string{"artifact_id": a.ID, "name": a.Name, "mime_type": a.MimeType})
	return nil
}

// quotaExceeded is the 413 of an upload over the conversation's storage
// quota, room bytes being left.
func quotaExceeded(room int64) *Error {
	return errorf(http.StatusRequestEntityTooLarge, "quota_exceeded", fmt.Sprintf(
		"the file does not fit in this conversation's storage quota (%s left); delete the conversation or start a new one", artifact.FormatBytes(room)))
}

// maxFileName is the longest upload name, in characters.
const maxFileName = 200

// checkFileName refuses an upload name that is not a plain file name: empty,
// "." or "..", longer than maxFileName characters (runes, not bytes), not
// UTF-8, or holding a slash, a backslash, a double quote or a control or
// format character (bidirectional overrides included). The name reaches
// Content-Disposition headers, saved files and the model's prompt.
func checkFileName(name string) error {
	bad := func(why string) error {
		return errorf(http.StatusBadRequest, "invalid_name", "the query parameter name must be a plain file name of at most 200 characters: "+why)
	}
	switch {
	case name == "":
		return bad("it is missing")
	case name == "." || name == "..":
		return bad(name + " is not a file name")
	case !utf8.ValidString(name):
		return bad("it is not valid UTF-8")
	case utf8.RuneCountInString(name) > maxFileName:
		return bad(fmt.Sprintf("it has %d characters", utf8.RuneCountInString(name)))
	}
	for _, c := range name {
		switch {
		case c == '/' || c == '\\':
			return bad("no slashes or backslashes")
		case c == '"':
			return bad("no double quotes")
		}
	}
	if c, ok := badRune(name, true); ok {
		return bad(fmt.Sprintf("no control or format characters (it holds %s)", runeName(c)))
	}
	return nil
}

// artifactLinkTTL is how long an artifact link (a redirect's or a
// ?redirect=false answer's) stays valid.
const artifactLinkTTL = 5 * time.Minute

func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request, user string) error {
	link := false
	switch v := r.URL.Query().Get("redirect"); v {
	case "", "true":
	case "false":
		link = true
	default:
		return errorf(http.StatusBadRequest, "invalid_query", `redirect must be "true" or "false"`)
	}
	conv, _, err := s.step(r.Context(), user, r.PathValue("cid"), record.Query{})
	if err != nil {
		return err
	}
	aid := r.PathValue("aid")
	if err := s.withArtifacts(r.Context(), conv, aid); err != nil {
		return err
	}
	var meta *artifact.Artifact
	for i := range conv.Artifacts {
		if conv.Artifacts[i].ID == aid {
			meta = &conv.Artifacts[i]
		}
	}
	if meta == nil {
		return errorf(http.StatusNotFound, "not_found", "no such artifact")
	}
	if link || s.RedirectArtifacts {
		expires := s.now().Add(artifactLinkTTL)
		u, err := s.Artifacts.URL(r.Context(), conv.Meta.ID, aid, artifactLinkTTL)
		if err != nil {
			return fmt.Errorf("presign artifact: %w", err)
		}
		if link {
			// The link itself: a browser fetches it without the API's
			// Authorization header, and a cross-origin fetch sends the page's
			// Origin, which the bucket's CORS rule admits (following a 302
			// from the API would send Origin: null).
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			writeJSON(w, http.StatusOK, map[string]string{"url": u, "expires_at": expires.Format(time.RFC3339)})
			return nil
		}
		http.Redirect(w, r, u, http.StatusFound)
		return nil
	}
	body, mime, err := s.Artifacts.Get(r.Context(), conv.Meta.ID, aid)
	if errors.Is(err, artifact.ErrNotFound) {
		return errorf(http.StatusNotFound, "not_found", "the artifact's bytes are gone")
	}
	if err != nil {
		return fmt.Errorf("read artifact: %w", err)
	}
	defer body.Close()
	if mime == "" {
		mime = meta.MimeType
	}
	w.Header().Set("Content-Type", mime)
	// An active type (SVG, HTML …) downloads; only passive ones show inline.
	w.Header().Set("Content-Disposition", artifact.Disposition(meta.Name, mime))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// An artifact is data, never a page of this origin: no scripts, no
	// requests, whatever its type claims.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	_, err = io.Copy(w, body)
	return err
}

// checkSupersedes refuses a message that would replace turn tid unless
// tid is the conversation's newest turn and has ended: only the last
// message is edited or regenerated, and never under a turn still running
// or waiting (stop it first).
func (s *Server) checkSupersedes(ctx context.Context, user, cid, tid string) error {
	conv, _, err := s.conversation(ctx, user, cid, "")
	if err != nil {
		return err
	}
	old, ok := conv.Turn(tid)
	if !ok {
		return errorf(http.StatusNotFound, "not_found", "supersedes names no turn of this conversation")
	}
	if last := conv.Turns[len(conv.Turns)-1]; last.ID != tid {
		return errorf(http.StatusConflict, "not_last_turn", "only the newest turn can be edited and resent or regenerated; "+tid+" is not it")
	}
	if !old.Status.Final() {
		return errorf(http.StatusConflict, "turn_not_ended", fmt.Sprintf("the turn to replace is still %s; stop it first or wait for its end", old.Status))
	}
	return nil
}

// postMessage starts a turn with the user's message (POST …/messages): it
// reads and checks the message, loads the conversation and its files, lets
// a typed yes or no decide a waiting approval, supersedes the turns still
// waiting for the user, stores the new turn and starts its execution. A
// plain message to a conversation where no turn is active is stored
// without the load (postPlain).
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, user string) error {
	msg, err := s.readMessage(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if done, err := s.postPlain(ctx, w, user, r.PathValue("cid"), msg); done || err != nil {
		return err
	}
	conv, _, err := s.step(ctx, user, r.PathValue("cid"), record.Query{})
	if err != nil {
		return err
	}
	if msg.Supersedes != "" {
		if err := s.checkSupersedes(ctx, user, conv.Meta.ID, msg.Supersedes); err != nil {
			return err
		}
	}
	if err := s.withArtifacts(ctx, conv, msg.Files...); err != nil {
		return err
	}
	files, err := uploads(conv, msg.Files)
	if err != nil {
		return err
	}
	if msg.Workflow != nil {
		if err := s.checkSelection(ctx, conv, msg.Workflow, msg.text != ""); err != nil {
			return err
		}
	}
	if v, ok, err := s.decideByText(ctx, conv, msg, files); err != nil || ok {
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"turn_id": v.TurnID, "status": v.Status})
		return nil
	}
	if err := s.supersedeWaiting(ctx, conv, msg.Files); err != nil {
		return err
	}
	// The turn is one trace (pkg/telemetry): its root span's context goes
	// into the record and the execution's input; the step that ends the
	// turn exports that span.
	ctx, traceparent := s.Tracing.StartTurn(ctx)
	ctx, span := s.Tracing.Tracer().Start(ctx, telemetry.SpanStartTurn)
	defer span.End()
	t := s.newTurn(msg, files, traceparent)
	// The turn's first LLM step reads what this write leaves: the write
	// reads it ahead (docs/architecture.md, "A step's read rides on the
	// write before it"), unless the conversation is renamed after it.
	var after string
	renamed := conv.Meta.Title == "" && msg.text == "" && msg.Workflow != nil
	if ra, ok := s.Store.(record.ReadAhead); ok && !renamed {
		after, err = ra.SaveTurnAhead(ctx, conv.Meta.ID, t, s.Limits.LLMQuery(t.ID))
	} else {
		err = s.Store.SaveTurn(ctx, conv.Meta.ID, t)
	}
	if err != nil {
		t.Events = nil
		return fmt.Errorf("store turn: %w", err)
	}
	title := ""
	if renamed {
		// A conversation opened by a workflow is titled by its name (the
		// first message's text titles the others).
		title = s.workflowName(ctx, msg.Workflow.ID)
	}
	return s.turnStored(ctx, w, span, user, conv.Meta.ID, t, traceparent, after, title)
}

// postPlain is postMessage of a plain message (text alone: no files, no
// workflow, no turn it replaces) in one round trip, when the store can
// check in the turn's write what postMessage's read is for
// (record.FirstWrite): that the conversation is the user's, and that none
// of its turns runs or waits, so that no reply, approval or supersession
// is due and the message starts a turn. The write reads ahead for the
// first LLM step as postMessage's does. done false: the write found the
// conversation otherwise (or gone, or someone else's) and wrote nothing,
// and postMessage reads it and goes on as for any message, which answers
// what the checks found (docs/architecture.md, "A plain message is one
// round trip").
func (s *Server) postPlain(ctx context.Context, w http.ResponseWriter, user, cid string, msg message) (done bool, err error) {
	fw, ok := s.Store.(record.FirstWrite)
	if !ok || len(msg.Files) > 0 || msg.Workflow != nil || msg.Supersedes != "" {
		return false, nil
	}
	began := time.Now()
	tctx, traceparent := s.Tracing.StartTurn(ctx)
	t := s.newTurn(msg, nil, traceparent)
	after, err := fw.SaveFirstTurn(ctx, cid, user, t, s.Limits.LLMQuery(t.ID))
	if errors.Is(err, record.ErrReadFirst) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("store turn: %w", err)
	}
	// The turn's span starts with the request's work, now that there is
	// a turn: a message that turns out to answer a pause starts none.
	tctx, span := s.Tracing.Tracer().Start(tctx, telemetry.SpanStartTurn, trace.WithTimestamp(began))
	defer span.End()
	return true, s.turnStored(tctx, w, span, user, cid, t, traceparent, after, "")
}

// turnStored is the end of postMessage once turn t of conversation cid
// is stored: its events go to the live streams, the owner's list hears
// of it, the conversation takes title (when not ""), and its execution
// starts (202).
func (s *Server) turnStored(ctx context.Context, w http.ResponseWriter, span trace.Span, user, cid string, t *record.Turn, traceparent, after, title string) error {
	span.SetAttributes(attribute.String("gen_ai.conversation.id", cid), attribute.String("clientagent.turn.id", t.ID))
	if s.Live != nil && len(t.Events) > 0 {
		s.Live.Publish(ctx, cid, t.Events...)
	}
	t.Events = nil
	// The owner's conversation list hears of the turn while its execution
	// starts: the event's round trip is off the request's path, and it is
	// written long before the turn's first step could report a change.
	told, status := make(chan struct{}), map[string]any{"status": t.Status, "turn_id": t.ID}
	gopool.Go(func() {
		defer close(told)
		s.userEvent(ctx, user, record.EventConversationStatus, cid, status)
	})
	defer func() { <-told }()
	if title != "" {
		if err := s.Store.Rename(ctx, cid, title); err != nil {
			s.log().WarnContext(ctx, "title a workflow conversation", "conversation", cid, "error", err.Error())
		}
	}
	if err := s.startTurn(ctx, cid, t, traceparent, after); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"turn_id": t.ID, "status": t.Status})
	return nil
}

// message is a checked POST …/messages: text is what the model reads of
// it (a "/workflow <id>" command taken out), typed what the user typed.
type message struct {
	wire.Message
	text, typed string
}

// readMessage decodes and checks the body of POST …/messages; a
// "/workflow <id> [text]" command becomes the workflow selection.
func (s *Server) readMessage(r *http.Request) (message, error) {
	var body wire.Message
	if err := decode(r, int64(s.MaxText)*12+64<<10, &body); err != nil {
		return message{}, err
	}
	if err := checkText("text", body.Text); err != nil {
		return message{}, err
	}
	text := strings.TrimSpace(body.Text)
	typed := text
	if cmd, ok := strings.CutPrefix(text, "/workflow"); ok && (cmd == "" || cmd[0] == ' ' || cmd[0] == '\t' || cmd[0] == '\n') {
		// docs/design.md §3.4: "/workflow <id>" selects a workflow explicitly;
		// "/workflow <id> some text" makes the text a hint for the model.
		if body.Workflow != nil {
			return message{}, errorf(http.StatusBadRequest, "invalid_workflow", "select the workflow either with /workflow in the text or with the workflow field, not both")
		}
		id, rest, _ := strings.Cut(strings.TrimSpace(cmd), " ")
		if id == "" {
			return message{}, errorf(http.StatusBadRequest, "invalid_workflow", "usage: /workflow <id> [text]; "+s.workflowList(r.Context()))
		}
		body.Workflow = &record.WorkflowSelection{ID: id}
		text = strings.TrimSpace(rest)
	}
	if text == "" && body.Workflow == nil {
		return message{}, errorf(http.StatusBadRequest, "missing_text", "text is required (or a workflow selection)")
	}
	if n := len([]rune(text)); n > s.MaxText {
		return message{}, errorf(http.StatusRequestEntityTooLarge, "text_too_long", fmt.Sprintf("text is %d characters; the limit is %d", n, s.MaxText))
	}
	if body.Workflow != nil && strings.TrimSpace(body.Workflow.ID) == "" {
		return message{}, errorf(http.StatusBadRequest, "invalid_workflow", "workflow.id is required")
	}
	return message{Message: body, text: text, typed: typed}, nil
}

// decideByText lets a typed yes or no (no files, no workflow) decide the
// approval the page shows: the newest one awaiting a decision, by its id.
// ok reports that the message was that decision.
func (s *Server) decideByText(ctx context.Context, conv *record.Conversation, msg message, files []artifact.Artifact) (v wire.Turn, ok bool, err error) {
	owner := awaitingApproval(conv)
	if owner == nil || len(files) > 0 || msg.Workflow != nil || msg.Supersedes != "" {
		return wire.Turn{}, false, nil
	}
	decision, ok := yesNo(msg.text)
	if !ok {
		return wire.Turn{}, false, nil
	}
	v, err = s.answer(ctx, conv, owner, turn.Reply{Approval: &wire.Decision{ID: turn.ApprovalID(owner), Decision: decision, Note: msg.text}})
	return v, err == nil, err
}

// supersedeWaiting ends every turn still waiting for the user: new free
// text supersedes them, and its files are named in the superseded calls'
// results too (docs/design.md §3.5).
func (s *Server) supersedeWaiting(ctx context.Context, conv *record.Conversation, files []string) error {
	for _, t := range conv.Turns {
		if t.Status.Waiting() && t.TaskToken != "" && !t.Answered() {
			if err := s.sendReply(ctx, conv.Meta.ID, t, turn.Reply{Superseded: true, Files: files}); err != nil && !isConflict(err) {
				return err
			}
		}
	}
	return nil
}

// newTurn is the running turn msg starts: the model's user message, the
// transcript's entry, and (with an event log) its turn.started, which goes
// to the log with the turn's first write.
func (s *Server) newTurn(msg message, files []artifact.Artifact, traceparent string) *record.Turn {
	now := s.now()
	t := &record.Turn{
		ID:        newID("t_"),
		StartedAt: now,
		UpdatedAt: now,
		Status:    record.StatusRunning,
		Text:      msg.text,
		Files:     msg.Files,
		Workflow:  msg.Workflow,
		Trace:     traceparent,
		// An edited or regenerated message replaces the turn it names in
		// the model's window (record.Conversation.LLMWindow).
		Supersedes: msg.Supersedes,
	}
	if msg.text != "" {
		content := catalog.UserMessage(msg.text, files)
		if msg.Workflow != nil {
			// docs/design.md §3.4: a workflow chosen with free text is a hint; the model
			// fills the workflow's inputs from the message.
			content += fmt.Sprintf("\n\n(The user chose the workflow %q: call the tool %s, taking its inputs from this message.)",
				msg.Workflow.ID, catalog.WorkflowToolName(msg.Workflow.ID))
		}
		t.Messages = []llm.Message{{Role: llm.RoleUser, Content: content}}
		t.History = []record.HistoryEntry{{Role: "user", Kind: "message", Content: msg.typed, Artifacts: refs(files), At: now}}
	} else {
		// Files uploaded for the selection are named like a message's
		// (docs/design.md §3.5): an artifact input left out is then the model's to
		// pick, and these are the likely ones.
		t.Messages = []llm.Message{{Role: llm.RoleUser, Content: catalog.UserMessage("Run the workflow "+msg.Workflow.ID+".", files)}}
		shown := msg.typed
		if shown == "" {
			shown = "Run the workflow " + msg.Workflow.ID
		}
		t.History = []record.HistoryEntry{{Role: "user", Kind: "message", Content: shown, Artifacts: refs(files), At: now}}
	}
	if s.Events != nil {
		// turn.started goes to the event log with the turn's first write.
		t.Events = []record.Event{{Type: record.EventTurnStarted, TurnID: t.ID, At: now, Data: map[string]any{"text": msg.typed}}}
	}
	return t
}

// startTurn starts the stored turn t's execution. One that cannot start
// marks the turn failed; Step Functions briefly unavailable is a 503 (the
// message may be sent again).
func (s *Server) startTurn(ctx context.Context, cid string, t *record.Turn, traceparent, after string) error {
	execInput := map[string]any{
		"conversation_id":       cid,
		"turn_id":               t.ID,
		"await_timeout_seconds": int(s.Limits.AwaitTimeout / time.Second),
		"max_concurrency":       s.Limits.MaxConcurrency,
	}
	if after != "" {
		execInput["after"] = after // the first LLM step's read, read ahead
	}
	start := &sfn.StartExecutionInput{StateMachineArn: aws.String(s.StateMachineARN), Name: aws.String(t.ID)}
	if traceparent != "" {
		execInput["trace"] = traceparent
		// Step Functions' and Lambda's X-Ray segments join the same trace id.
		if sc, ok := telemetry.ParseTraceparent(traceparent); ok {
			start.TraceHeader = aws.String(telemetry.XRayTraceHeader(sc))
		}
	}
	input, _ := json.Marshal(execInput)
	start.Input = aws.String(string(input))
	_, err := s.Executions.StartExecution(ctx, start)
	if err == nil {
		return nil
	}
	t.Status, t.Error = record.StatusFailed, "The turn could not be started; please send the message again."
	if serr := s.Store.SaveTurn(ctx, cid, t); serr != nil {
		s.log().ErrorContext(ctx, "mark unstarted turn failed", "turn", t.ID, "error", serr)
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && (re.HTTPStatusCode() >= 500 || re.HTTPStatusCode() == http.StatusTooManyRequests) {
		// Step Functions (or the local engine's store) is briefly
		// unavailable: the message is kept and may be sent again.
		s.log().WarnContext(ctx, "start execution unavailable", "turn", t.ID, "error", err.Error())
		return &Error{Status: http.StatusServiceUnavailable, Code: "service_unavailable", RetryAfter: 2 * time.Second,
			Message: "the turn could not be started right now (the workflow service is unavailable); send the message again shortly"}
	}
	return fmt.Errorf("start execution %s: %w", t.ID, err)
}

// workflowName is workflow id's name in the catalog, or its id.
func (s *Server) workflowName(ctx context.Context, id string) string {
	if cat, err := s.Catalogs.Catalog(ctx); err == nil {
		if e, ok := cat.Lookup(catalog.WorkflowToolName(id)); ok && e.Workflow.Name != "" {
			return e.Workflow.Name
		}
	}
	return id
}

// checkSelection refuses an explicit workflow selection that cannot start:
// an unknown workflow, or (without free text, when the inputs become the
// call's arguments as they are) inputs the workflow's tool would refuse. A
// missing input is fine: the turn asks for it in a form (docs/design.md §3.4).
func (s *Server) checkSelection(ctx context.Context, conv *record.Conversation, sel *record.WorkflowSelection, hint bool) error {
	cat, err := s.Catalogs.Catalog(ctx)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	tool := catalog.WorkflowToolName(sel.ID)
	e, ok := cat.Lookup(tool)
	if !ok || e.Kind != catalog.EntryWorkflow {
		return errorf(http.StatusBadRequest, "unknown_workflow", "no workflow "+sel.ID+"; "+workflowIDs(cat))
	}
	if hint {
		return nil
	}
	for _, p := range e.Params {
		if p.ArtifactRef && sel.Inputs[p.Name] == nil {
			// The user is never asked for an artifact (docs/design.md §3.2): the call's
			// error result sends the model to the catalog for it.
			return nil
		}
	}
	probe := &record.Turn{ID: "t_probe", Workflow: sel}
	inputs := sel.Inputs
	if inputs == nil {
		inputs = map[string]any{}
	}
	args, _ := json.Marshal(inputs)
	call := llm.ToolCall{ID: turn.SelectionCallID(probe.ID), Name: tool, Arguments: string(args)}
	if pc := batch.Validate(cat, []llm.ToolCall{call}, turn.Env(conv, probe))[0]; pc.State == record.CallInvalid {
		return errorf(http.StatusBadRequest, "invalid_workflow_inputs", "workflow "+sel.ID+": "+pc.Error)
	}
	return nil
}

// workflowList names the workflows a user can select, for error messages.
func (s *Server) workflowList(ctx context.Context) string {
	cat, err := s.Catalogs.Catalog(ctx)
	if err != nil {
		return "the workflows are not available now"
	}
	return workflowIDs(cat)
}

func workflowIDs(cat *catalog.Catalog) string {
	var ids []string
	for _, w := range cat.Workflows() {
		ids = append(ids, w.ID)
	}
	if len(ids) == 0 {
		return "there are no workflows"
	}
	return "workflows: " + strings.Join(ids, ", ")
}

// awaitingApproval is the newest turn whose open approval a short yes/no
// would decide.
func awaitingApproval(conv *record.Conversation) *record.Turn {
	for i := len(conv.Turns) - 1; i >= 0; i-- {
		if t := conv.Turns[i]; t.Status == record.StatusAwaitingApproval && t.TaskToken != "" && !t.Answered() {
			return t
		}
	}
	return nil
}

// withArtifacts adds to conv's catalog the artifacts ids names that the
// request's load did not read (it reads only the newest of a long catalog).
func (s *Server) withArtifacts(ctx context.Context, conv *record.Conversation, ids ...string) error {
	if conv.ArtifactTotal == 0 || len(ids) == 0 {
		return nil
	}
	arts, err := s.Store.Artifacts(ctx, conv.Meta.ID, ids...)
	if err != nil {
		return fmt.Errorf("read artifacts: %w", err)
	}
	conv.Artifacts = append(conv.Artifacts, arts...)
	return nil
}

func uploads(conv *record.Conversation, ids []string) ([]artifact.Artifact, error) {
	var files []artifact.Artifact
	for _, id := range ids {
		found := false
		for _, a := range conv.Artifacts {
			if a.ID == id {
				files, found = append(files, a), true
				break
			}
		}
		if !found {
			return nil, errorf(http.StatusBadRequest, "unknown_file", "files names an artifact this conversation does not have: "+id)
		}
	}
	return files, nil
}

func refs(as []artifact.Artifact) []artifact.Ref {
	var out []artifact.Ref
	for _, a := range as {
		out = append(out, a.Ref())
	}
	return out
}

// yesNo reads a short reply to a pending approval as the decision.
func yesNo(text string) (string, bool) {
	t := strings.ToLower(strings.Trim(strings.TrimSpace(text), ".!? "))
	if len(strings.Fields(t)) > 3 {
		return "", false
	}
	switch t {
	case "yes", "y", "ok", "okay", "approve", "approved", "sure", "go ahead", "do it", "yes please", "ja", "si", "sí", "yep", "yeah":
		return "approve", true
	case "no", "n", "nope", "reject", "rejected", "cancel", "stop", "don't", "do not", "no thanks", "nein":
		return "reject", true
	}
	return "", false
}

func (s *Server) getTurn(w http.ResponseWriter, r *http.Request, user string) error {
	conv, t, outcomes, err := s.turn(r, user, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(r.Context(), conv, t, outcomes))
	return nil
}

// turn reads the request's turn ({cid}, {tid}) of the user's conversation,
// with its outcomes when asked: 404 for a conversation or turn that is not
// there (or not the user's).
func (s *Server) turn(r *http.Request, user string, outcomes bool) (*record.Conversation, *record.Turn, map[string]record.CallOutcome, error) {
	tid := r.PathValue("tid")
	conv, out, err := s.step(r.Context(), user, r.PathValue("cid"), record.Query{TurnID: tid, Outcomes: outcomes})
	if err != nil {
		return nil, nil, nil, err
	}
	t, ok := conv.Turn(tid)
	if !ok {
		return nil, nil, nil, errorf(http.StatusNotFound, "not_found", "no such turn")
	}
	return conv, t, out, nil
}

// view renders a turn; a turn the record still calls running whose
// execution has ended abnormally (the step that would have recorded the
// failure could not reach Valkey) is reported failed.
func (s *Server) view(ctx context.Context, conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome) wire.Turn {
	v := turnview.New(conv, t, outcomes)
	if v.Status != record.StatusRunning {
		return s.settled(ctx, conv, t, outcomes, v)
	}
	fresh := s.FreshFor
	if fresh == 0 {
		fresh = DefaultFreshFor
	}
	now := s.now()
	if !t.Answered() && now.Sub(t.UpdatedAt) < fresh {
		// A step wrote the turn a moment ago: its execution is alive.
		return v
	}
	if at, ok := s.alive.Load(t.ID); ok && now.Sub(at.(time.Time)) < fresh {
		return v
	}
	out, err := s.Executions.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(s.executionARN(t.ID))})
	var missing *types.ExecutionDoesNotExist
	if errors.As(err, &missing) && s.now().Sub(t.StartedAt) > time.Minute {
		// The API stored the turn but never started its execution (it
		// crashed in between): nothing will run it.
		return s.ended(ctx, conv, t, v, turn.ErrNameNeverStarted, "", "The turn was never started; your message is kept. Please send it again.")
	}
	if err != nil {
		return v
	}
	switch out.Status {
	case types.ExecutionStatusRunning:
		s.rememberAlive(t.ID, now, fresh)
	case types.ExecutionStatusFailed, types.ExecutionStatusAborted, types.ExecutionStatusTimedOut:
		return s.ended(ctx, conv, t, v, aws.ToString(out.Error), aws.ToString(out.Cause),
			"The turn failed because of an internal error; your conversation is intact and you can send the request again.")
	}
	return v
}

// settled shows an ended turn after settling its lost calls, if it has
// any (turn.Handlers.SettleLost): calls that had started before its cancel
// and whose steps can no longer report.
func (s *Server) settled(ctx context.Context, conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome, v wire.Turn) wire.Turn {
	if s.Failures == nil || !s.Failures.CallsLost(t, outcomes) {
		return v
	}
	ref := turn.Ref{ConversationID: conv.Meta.ID, TurnID: t.ID}
	if _, err := s.Failures.SettleLost(ctx, ref); err != nil {
		s.log().WarnContext(ctx, "settle lost calls", "conversation", ref.ConversationID, "turn", ref.TurnID, "error", err)
		return v
	}
	if v2, ok := s.reread(ctx, ref); ok {
		return v2
	}
	return v
}

// reread is the view of turn ref read again, if it has ended.
func (s *Server) reread(ctx context.Context, ref turn.Ref) (wire.Turn, bool) {
	conv, outcomes, err := s.Store.Load(ctx, ref.ConversationID, ref.TurnID)
	if err != nil {
		return wire.Turn{}, false
	}
	t, ok := conv.Turn(ref.TurnID)
	if !ok || !t.Status.Final() {
		return wire.Turn{}, false
	}
	return turnview.New(conv, t, outcomes), true
}

// ended shows a turn whose execution is over although its record still
// says running. The record is read again (the last step usually recorded
// why the turn ended just after the first read); if it still says running,
// the failure is recorded on it (Failures) so it ends for every reader, and
// otherwise only this view says failed, with msg.
func (s *Server) ended(ctx context.Context, conv *record.Conversation, t *record.Turn, v wire.Turn, errName, cause, msg string) wire.Turn {
	ref := turn.Ref{ConversationID: conv.Meta.ID, TurnID: t.ID}
	if v2, ok := s.reread(ctx, ref); ok {
		return v2
	}
	if s.Failures != nil {
		if err := s.Failures.RecordFailure(ctx, ref, errName, cause); err != nil {
			s.log().WarnContext(ctx, "record failure of a dead execution", "conversation", ref.ConversationID, "turn", ref.TurnID, "error", err)
		} else if v2, ok := s.reread(ctx, ref); ok {
			return v2
		}
	}
	v.Status = record.StatusFailed
	v.Reply = msg
	v.ExpiresAt = ""
	if v.EndedAt == "" {
		v.EndedAt = s.now().Format(record.TimeLayout)
	}
	return v
}

// rememberAlive notes that turn tid's execution ran at now; every 1024th
// note drops the notes older than fresh, so the map stays small.
func (s *Server) rememberAlive(tid string, now time.Time, fresh time.Duration) {
	s.alive.Store(tid, now)
	if s.aliveSets.Add(1)%1024 != 0 {
		return
	}
	s.alive.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) >= fresh {
			s.alive.Delete(k)
		}
		return true
	})
}

func (s *Server) postInput(w http.ResponseWriter, r *http.Request, user string) error {
	var body wire.Input
	// Step Functions takes at most 256 KiB of task output; answers stay
	// well under it even with JSON escaping.
	if err := decode(r, 64<<10, &body); err != nil {
		return err
	}
	// Presence, not content, decides: {"answers": {}, "approval": {…}} is
	// both (decode refuses null, so a field sent is non-nil).
	if (body.Answers != nil) == (body.Approval != nil) {
		return errorf(http.StatusBadRequest, "invalid_input", "send either answers or approval, not both and not neither")
	}
	if body.Answers != nil && len(body.Answers) == 0 {
		return errorf(http.StatusBadRequest, "invalid_input", "answers is empty: send the form's answers by call id")
	}
	if a := body.Approval; a != nil {
		if err := checkText("approval.note", a.Note); err != nil {
			return err
		}
		if a.Decision != "approve" && a.Decision != "reject" {
			return errorf(http.StatusBadRequest, "invalid_decision", `approval.decision must be "approve" or "reject"`)
		}
		if strings.TrimSpace(a.ID) == "" {
			return errorf(http.StatusBadRequest, "missing_approval_id", "approval.id is required: send the id of the approval shown (the turn's approval.id), so the decision covers exactly what you saw")
		}
		if len(a.Arguments) > 0 && a.Decision != "approve" {
			return errorf(http.StatusBadRequest, "invalid_edit", "approval.arguments (edited arguments) come only with the decision approve")
		}
	}
	ctx := r.Context()
	conv, t, _, err := s.turn(r, user, false)
	if err != nil {
		return err
	}
	var edits any
	if body.Approval != nil {
		edits = body.Approval.Arguments
	}
	if err := turn.ResolveArtifacts(ctx, s.Store, conv, t, edits, body.Files); err != nil {
		return err
	}
	if _, err := uploads(conv, body.Files); err != nil {
		return err
	}
	v, err := s.answer(ctx, conv, t, turn.Reply{Answers: body.Answers, Approval: body.Approval, Files: body.Files})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, v)
	return nil
}

// notWaiting is the 409 of an answer nothing waits for, saying why: the
// turn has ended (and how), or it is running, or it waits for the other
// kind of input.
func notWaiting(t *record.Turn) *Error {
	var why string
	switch {
	case t.Answered():
		why = "it was already answered and the turn is running again"
	case len(t.Answers) > 0 && (t.Status == record.StatusRunning || t.Status == record.StatusSucceeded || t.Status == record.StatusFailed):
		// A second submit (another tab, a double click) after the first
		// was applied.
		why = fmt.Sprintf("it was already answered (the turn is %s now)", t.Status)
	case t.Status.Final():
		why = fmt.Sprintf("the turn has ended (%s)", t.Status)
	case t.Status == record.StatusRunning:
		why = "the turn is running and has asked nothing"
	case t.Status == record.StatusAwaitingInput:
		why = "it waits for form answers, not an approval"
	case t.Status == record.StatusAwaitingApproval:
		why = "it waits for an approval, not form answers"
	default:
		why = "nothing is open"
	}
	return errorf(http.StatusConflict, "not_waiting", "this turn is not waiting for that input: "+why)
}

// answer checks a reply against what the turn waits for, validates form
// answers like the model's arguments, and hands the reply to the paused
// execution. Nothing runs here; the turn's ValidateBatch step applies it.
func (s *Server) answer(ctx context.Context, conv *record.Conversation, t *record.Turn, reply turn.Reply) (wire.Turn, error) {
	conflict := notWaiting(t)
	if t.TaskToken == "" || t.Answered() {
		return wire.Turn{}, conflict
	}
	switch {
	case reply.Approval != nil && t.Status != record.StatusAwaitingApproval:
		return wire.Turn{}, conflict
	case reply.Approval != nil:
		cat, err := s.Catalogs.Catalog(ctx)
		if err != nil {
			return wire.Turn{}, fmt.Errorf("catalog: %w", err)
		}
		// Decide on a copy: it checks the id against the open approval and
		// validates edits like the model's arguments; the turn's
		// ValidateBatch step applies the reply for real.
		calls := slices.Clone(t.Pending)
		switch err := turn.Decide(cat, calls, *reply.Approval, turn.Env(conv, t)); {
		case errors.Is(err, batch.ErrApprovalStale):
			return wire.Turn{}, errorf(http.StatusConflict, "stale_approval", "this approval is not the one waiting for a decision any more (it changed since it was shown); fetch the turn and decide on the approval it shows now")
		case errors.Is(err, turn.ErrEditRefused):
			return wire.Turn{}, errorf(http.StatusBadRequest, "invalid_edit", err.Error())
		case errors.Is(err, batch.ErrInvalidEdit):
			msg := err.Error()
			if _, detail, ok := strings.Cut(msg, batch.ErrInvalidEdit.Error()+": "); ok {
				msg = detail
			}
			return wire.Turn{}, errorf(http.StatusBadRequest, "invalid_arguments", "The edited arguments were not accepted: "+msg)
		case errors.Is(err, batch.ErrNotWaiting):
			return wire.Turn{}, conflict
		case err != nil:
			return wire.Turn{}, errorf(http.StatusBadRequest, "invalid_input", err.Error())
		}
	case len(reply.Answers) > 0:
		if t.Status != record.StatusAwaitingInput {
			return wire.Turn{}, conflict
		}
		cat, err := s.Catalogs.Catalog(ctx)
		if err != nil {
			return wire.Turn{}, fmt.Errorf("catalog: %w", err)
		}
		env := turn.Env(conv, t)
		for callID, ans := range reply.Answers {
			var pc *record.PendingCall
			for i := range t.Pending {
				if t.Pending[i].CallID == callID && t.Pending[i].State == record.CallNeedsInput {
					c := t.Pending[i]
					pc = &c
				}
			}
			if pc == nil {
				return wire.Turn{}, errorf(http.StatusBadRequest, "unknown_call", "no open form for call "+callID)
			}
			if err := batch.ApplyAnswers(cat, pc, ans, env); err != nil {
				// Keep what the user can act on: the field and the reason.
				msg := err.Error()
				if _, detail, ok := strings.Cut(msg, batch.ErrInvalidAnswer.Error()+": "); ok {
					msg = detail
				}
				return wire.Turn{}, errorf(http.StatusBadRequest, "invalid_answer", fmt.Sprintf("The answer for %s was not accepted: %s", pc.Tool, msg))
			}
		}
	}
	if err := s.sendReply(ctx, conv.Meta.ID, t, reply); err != nil {
		return wire.Turn{}, err
	}
	v := turnview.New(conv, t, nil)
	v.Status, v.Form, v.Approval = record.StatusRunning, nil, nil
	return v, nil
}

// sendReply answers the turn's task token. A token whose task has closed
// (answered twice, expired) is a conflict.
func (s *Server) sendReply(ctx context.Context, cid string, t *record.Turn, reply turn.Reply) error {
	if err := s.Store.MarkAnswered(ctx, cid, t.ID, t.TaskToken); err != nil {
		return err
	}
	out, _ := json.Marshal(reply)
	_, err := s.Executions.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(t.TaskToken), Output: aws.String(string(out))})
	if err == nil {
		return nil
	}
	if !isTokenClosed(err) {
		// The answer did not arrive: unmark it, so the user can send it again
		// (or supersede the turn) instead of waiting for the pause to expire.
		if uerr := s.Store.MarkAnswered(context.WithoutCancel(ctx), cid, t.ID, ""); uerr != nil {
			s.log().ErrorContext(ctx, "unmark answer", "turn", t.ID, "error", uerr)
		}
		return fmt.Errorf("send task success for turn %s: %w", t.ID, err)
	}
	// Closed meanwhile: say why, as the turn tells it now (most often
	// another answer that won the race: "already answered").
	if conv, _, lerr := s.Store.Load(ctx, cid, ""); lerr == nil {
		if now, ok := conv.Turn(t.ID); ok {
			if now.Answered() || len(now.Answers) > len(t.Answers) {
				return errorf(http.StatusConflict, "not_waiting", "this turn is not waiting for that input: it was already answered (another answer arrived first)")
			}
			return notWaiting(now)
		}
	}
	return errorf(http.StatusConflict, "not_waiting", "this turn is no longer waiting for that input (it was already answered, expired, was superseded or was cancelled meanwhile)")
}

// isTokenClosed reports whether Step Functions refused a token because its
// task has closed (answered, timed out, or the execution ended).
func isTokenClosed(err error) bool {
	var timedOut *types.TaskTimedOut
	var invalid *types.InvalidToken
	var doesNotExist *types.TaskDoesNotExist
	return errors.As(err, &timedOut) || errors.As(err, &invalid) || errors.As(err, &doesNotExist)
}

func isConflict(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusConflict
}

func (s *Server) executionARN(turnID string) string {
	return strings.Replace(s.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + turnID
}

func (s *Server) getCatalog(w http.ResponseWriter, r *http.Request, user string) error {
	cat, err := s.Catalogs.Catalog(r.Context())
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"skills": cat.Skills(), "workflows": cat.Workflows()})
	return nil
}
