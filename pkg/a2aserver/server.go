// Package a2aserver serves clientagent itself as an A2A agent (issue 17):
// an agent card with one skill per workflow template and a general chat
// skill, and a JSON-RPC endpoint (a2a-go's a2asrv transport) whose methods
// map onto clientagent's own HTTP API, called in process with the caller's
// Authorization header. A task is a turn, its context a conversation of
// the calling principal; message/send and message/stream start a turn or
// answer the one waiting, tasks/get reads it, tasks/cancel cancels it.
//
// Every rule of the API (ownership, validation, supersede, approvals by
// id) therefore holds unchanged: this package must not read or write the
// conversation record, start executions or decide anything the API
// decides. It keeps one thing of its own: which conversation a
// caller-chosen contextId names, in Valkey per principal.
package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
	"github.com/clientagent/clientagent/pkg/wire"
)

// Catalogs gives the tool catalogue the card's skills come from.
type Catalogs interface {
	Catalog(ctx context.Context) (*catalog.Catalog, error)
}

// Server is clientagent's A2A agent. Its zero value is not usable: API,
// Auth, Catalogs and Redis are required.
type Server struct {
	// API is clientagent's HTTP API (api.Server.Handler()); every A2A
	// method is one or more requests to it, made in process.
	API http.Handler
	// Auth finds the calling principal, as the API does (api.Server.Auth):
	// it keys the principal's contextId mapping, and a request without a
	// valid token is refused before any JSON-RPC is read.
	Auth auth.Authenticator
	// Catalogs is the tool catalogue the card's skills come from.
	Catalogs Catalogs
	// Redis keeps the mapping of caller-chosen contextIds to conversations.
	Redis redis.UniversalClient
	// Path is where the JSON-RPC endpoint is mounted ("/a2a" locally,
	// "/v1/a2a" behind API Gateway); the card is at
	// Path + "/.well-known/agent-card.json".
	Path string
	// PublicURL is the externally visible base URL (scheme://host) of the
	// mux serving Path; empty: derived from each request's Host and
	// X-Forwarded-Proto.
	PublicURL string
	// Streaming says whether message/stream is offered (the card's
	// capabilities.streaming). Off behind API Gateway, which buffers.
	Streaming bool
	// MaxWait bounds how long a blocking message/send (and one stream)
	// follows a turn before answering with the task still working; the
	// caller then polls tasks/get or resubscribes. Zero: DefaultMaxWait.
	MaxWait time.Duration
	// ContextTTL is how long a contextId mapping lives after its last use
	// (zero: DefaultContextTTL).
	ContextTTL time.Duration
	Logger     *slog.Logger
}

// Defaults of Server.
const (
	DefaultMaxWait    = 2 * time.Minute
	DefaultContextTTL = 30 * 24 * time.Hour
)

// Handler serves the card at GET Path/.well-known/agent-card.json (and at
// GET /.well-known/agent-card.json when Path is mounted at the root of the
// host) without auth, and JSON-RPC at POST Path with the API's auth.
func (s *Server) Handler() http.Handler {
	path := strings.TrimRight(s.Path, "/")
	rpc := a2asrv.NewJSONRPCHandler(&handler{s: s})
	mux := http.NewServeMux()
	card := a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(ctx context.Context) (*a2a.AgentCard, error) {
		base, _ := ctx.Value(baseKey{}).(string)
		return s.Card(ctx, base)
	}))
	withBase := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), baseKey{}, s.baseURL(r))))
		})
	}
	mux.Handle(path+a2asrv.WellKnownAgentCardPath, withBase(card))
	if path != "" {
		mux.Handle(a2asrv.WellKnownAgentCardPath, withBase(card))
	}
	authed := s.authed(rpc)
	mux.Handle("POST "+path, authed)
	mux.Handle("POST "+path+"/{$}", authed)
	return mux
}

type baseKey struct{}

// baseURL is the public URL of the JSON-RPC endpoint.
func (s *Server) baseURL(r *http.Request) string {
	b := strings.TrimRight(s.PublicURL, "/")
	if b == "" {
		b = lambdahttp.RequestBase(r)
	}
	return b
}

// caller is who an A2A request acts for: the principal and the header the
// API checks again on every in-process request.
type caller struct {
	principal     string
	authorization string
	base          string // public base URL, for artifact links
}

type callerKey struct{}

func callerFrom(ctx context.Context) (caller, bool) {
	c, ok := ctx.Value(callerKey{}).(caller)
	return c, ok
}

// authed refuses a request without a valid token with 401 (a JSON-RPC
// client sees an HTTP error, as from any protected agent) and puts the
// caller in the request's context.
func (s *Server) authed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := s.Auth.Subject(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="clientagent"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"a valid bearer token is required"}}`))
			return
		}
		c := caller{principal: user, authorization: r.Header.Get("Authorization"), base: s.baseURL(r)}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

func (s *Server) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) maxWait() time.Duration {
	if s.MaxWait > 0 {
		return s.MaxWait
	}
	return DefaultMaxWait
}

// handler is the a2asrv.RequestHandler: every method in terms of the API.
type handler struct{ s *Server }

var _ a2asrv.RequestHandler = (*handler)(nil)

func (h *handler) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	ref, err := parseTaskID(q.ID)
	if err != nil {
		return nil, err
	}
	v, err := h.s.getTurn(ctx, ref)
	if err != nil {
		return nil, err
	}
	return h.s.task(ctx, ref, v)
}

func (h *handler) OnCancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	ref, err := parseTaskID(p.ID)
	if err != nil {
		return nil, err
	}
	v, err := h.s.cancel(ctx, ref)
	if err != nil {
		return nil, err
	}
	return h.s.task(ctx, ref, v)
}

func (h *handler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	ref, since, err := h.s.send(ctx, p.Message)
	if err != nil {
		return nil, err
	}
	blocking := p.Config == nil || p.Config.Blocking == nil || *p.Config.Blocking
	var v wire.Turn
	if blocking {
		v, err = h.s.follow(ctx, ref, since, nil)
	} else {
		v, err = h.s.getTurn(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	return h.s.task(ctx, ref, v)
}

func (h *handler) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		ref, since, err := h.s.send(ctx, p.Message)
		if err != nil {
			yield(nil, err)
			return
		}
		h.s.stream(ctx, ref, since, true, yield)
	}
}

func (h *handler) OnResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		ref, err := parseTaskID(p.ID)
		if err == nil {
			_, err = h.s.getTurn(ctx, ref) // the caller's own turn, or not found
		}
		if err != nil {
			yield(nil, err)
			return
		}
		h.s.stream(ctx, ref, "", false, yield)
	}
}

func (h *handler) OnGetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *handler) OnListTaskPushConfig(context.Context, *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *handler) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *handler) OnDeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigParams) error {
	return a2a.ErrPushNotificationNotSupported
}

func (h *handler) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}

// stream yields the task, then its status updates while the turn runs,
// then its artifacts and a final status update once it settles (or a
// non-final one when MaxWait passes: the caller resubscribes). For a
// message just sent (fresh) the task comes first as it was accepted,
// working, even when the turn has already paused or ended by the time it
// is read: a fast turn reads the same as a slow one.
func (s *Server) stream(ctx context.Context, ref taskRef, since string, fresh bool, yield func(a2a.Event, error) bool) {
	v, err := s.getTurn(ctx, ref)
	if err != nil {
		yield(nil, err)
		return
	}
	first, err := s.task(ctx, ref, v)
	if err != nil {
		yield(nil, err)
		return
	}
	if fresh && settled(v) {
		accepted := *first
		accepted.Status = a2a.TaskStatus{State: a2a.TaskStateWorking}
		accepted.Artifacts = nil
		if !yield(&accepted, nil) {
			return
		}
		s.settle(first, v, yield)
		return
	}
	if settled(v) {
		yield(first, nil)
		return
	}
	if !yield(first, nil) {
		return
	}
	info := first
	stopped := false
	v, err = s.follow(ctx, ref, since, func(ev liveEvent) {
		if stopped {
			return
		}
		if msg := progressMessage(info, ev); msg != nil {
			if !yield(a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, msg), nil) {
				stopped = true
			}
		}
	})
	if stopped || ctx.Err() != nil {
		return
	}
	if err != nil {
		yield(nil, err)
		return
	}
	last, err := s.task(ctx, ref, v)
	if err != nil {
		yield(nil, err)
		return
	}
	s.settle(last, v, yield)
}

// settle yields the task's artifacts once turn v has settled, then its
// status update (final once settled).
func (s *Server) settle(last *a2a.Task, v wire.Turn, yield func(a2a.Event, error) bool) {
	if settled(v) {
		for _, a := range last.Artifacts {
			if !yield(&a2a.TaskArtifactUpdateEvent{TaskID: last.ID, ContextID: last.ContextID, Artifact: a, LastChunk: true}, nil) {
				return
			}
		}
	}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: last.ID, ContextID: last.ContextID, Status: last.Status, Final: settled(v), Metadata: last.Metadata}
	yield(ev, nil)
}

// errInternal is what a caller sees of a failure that is ours; the cause
// is logged.
func (s *Server) internal(ctx context.Context, op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusServiceUnavailable {
		return fmt.Errorf("%w: %s", a2a.ErrServerError, ae.message)
	}
	s.log().ErrorContext(ctx, "a2a "+op, "error", err.Error())
	return a2a.ErrInternalError
}
