// Package api is the HTTP API of docs/api/openapi.yaml: conversations, messages, turns,
// form answers and approvals, artifacts and the catalog. It starts turns
// and answers task tokens through the Step Functions API (the real SDK
// client, locally pointed at our engine), and reads the conversation
// record. It never runs the loop itself and never writes a running turn.
package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/metrics"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/turn"
)

// Executions is the part of the Step Functions API the API uses.
type Executions interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, opts ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
	StopExecution(ctx context.Context, in *sfn.StopExecutionInput, opts ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error)
	SendTaskSuccess(ctx context.Context, in *sfn.SendTaskSuccessInput, opts ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error)
}

// Failures records on a turn what its execution could not: that it ended
// abnormally, or that a call started before its cancel can no longer
// report (turn.Handlers implements both).
type Failures interface {
	RecordFailure(ctx context.Context, r turn.Ref, errName, cause string) error
	// CallsLost reports whether SettleLost would settle a call of t.
	CallsLost(t *record.Turn, outcomes map[string]record.CallOutcome) bool
	SettleLost(ctx context.Context, r turn.Ref) (bool, error)
}

// Server serves the API.
type Server struct {
	Store           record.Store
	Artifacts       artifact.Store
	Executions      Executions
	StateMachineARN string
	Catalogs        turn.Catalogs
	Auth            auth.Authenticator
	Limits          turn.Limits
	// MaxUpload bounds an uploaded artifact (413 above it).
	MaxUpload int64
	// MaxText bounds a message's text in characters.
	MaxText int
	// RedirectArtifacts answers artifact downloads with a redirect to a
	// presigned URL (S3) instead of streaming the bytes.
	RedirectArtifacts bool
	// FreshFor is how long after its last write a running turn is shown
	// as its record says, without asking Step Functions whether its
	// execution still runs (DescribeExecution is throttled per account, and
	// clients poll running turns every second). Zero: DefaultFreshFor.
	FreshFor time.Duration
	// Failures records a dead execution's failure on its turn (nil: the
	// API only reports it). turn.Handlers implements it.
	Failures Failures
	// Cancels ends turns at the user's request (nil: no cancel route).
	Cancels Cancels
	// Events is the conversations' live event log (nil: no event stream).
	Events record.EventLog
	// Live gets turn.started beside the event log (nil: the log only), as
	// turn.Handlers.Live gets the steps' events.
	Live turn.LivePublisher
	// Streams caps the event streams each user holds open (nil: no cap);
	// past MaxStreams (zero: DefaultMaxStreams) a stream is a 429.
	Streams    Streams
	MaxStreams int
	// EventsFor bounds one event stream (zero: DefaultEventsFor).
	EventsFor time.Duration
	// LiveBatch is how long an event stream may hold an event to send it
	// with the ones that follow (zero: DefaultLiveBatch).
	LiveBatch time.Duration
	// Tracing starts each turn's trace (nil: none; pkg/telemetry).
	Tracing *telemetry.Tracing
	// Info is what GET /v1/info answers (nil: DefaultInfo).
	Info *Info
	Now  func() time.Time
	// alive remembers when Step Functions last said a turn's execution
	// runs (turn id → time), so a quiet turn is asked about once per
	// FreshFor, not at every poll.
	alive     sync.Map
	aliveSets atomic.Int64
	Logger    *slog.Logger
}

// DefaultFreshFor is Server.FreshFor's default: a turn whose steps write
// at least this often never costs a DescribeExecution call, and one whose
// execution died reads as failed this long after its last write.
const DefaultFreshFor = 15 * time.Second

// Error is an API error: an HTTP status, a stable code and a message for
// the caller. Anything else becomes "internal error" and is logged in full,
// except the store faults of record (ErrUnavailable, ErrFull), which are
// 503 with a Retry-After.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

// errEmptyBody is a request without a body where one was expected.
var errEmptyBody = errorf(http.StatusBadRequest, "invalid_json", "the body is empty; send a JSON object")

var errNotFound = errorf(http.StatusNotFound, "not_found", "no such conversation")

// Store faults: the conversation store did not answer in time (it answers
// or gives up within about two seconds), or refused a write for lack of
// memory. Either may pass; clients retry after Retry-After.
var (
	errStoreUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "store_unavailable",
		Message: "the service is unavailable for a moment (its store did not answer); retry shortly", RetryAfter: 2 * time.Second}
	errStoreFull = &Error{Status: http.StatusServiceUnavailable, Code: "store_full",
		Message: "the service cannot store anything more right now; nothing was changed, retry later", RetryAfter: 10 * time.Second}
)

// routes are docs/api/openapi.yaml's routes: method and path pattern.
var routes = []string{
	"POST /v1/conversations",
	"GET /v1/conversations",
	"GET /v1/conversations/{cid}",
	"PATCH /v1/conversations/{cid}",
	"DELETE /v1/conversations/{cid}",
	"POST /v1/conversations/{cid}/artifacts",
	"GET /v1/conversations/{cid}/artifacts/{aid}",
	"POST /v1/conversations/{cid}/messages",
	"GET /v1/conversations/{cid}/events",
	"GET /v1/conversations/{cid}/turns/{tid}",
	"POST /v1/conversations/{cid}/turns/{tid}/input",
	"POST /v1/conversations/{cid}/turns/{tid}/cancel",
	"GET /v1/catalog",
	"GET /v1/info",
	"GET /v1/events",
}

// Handler returns the routes of docs/api/openapi.yaml.
func (s *Server) Handler() http.Handler {
	handlers := map[string]func(w http.ResponseWriter, r *http.Request, user string) error{
		"POST /v1/conversations":                          s.createConversation,
		"GET /v1/conversations":                           s.listConversations,
		"GET /v1/conversations/{cid}":                     s.getConversation,
		"PATCH /v1/conversations/{cid}":                   s.renameConversation,
		"DELETE /v1/conversations/{cid}":                  s.deleteConversation,
		"POST /v1/conversations/{cid}/artifacts":          s.uploadArtifact,
		"GET /v1/conversations/{cid}/artifacts/{aid}":     s.getArtifact,
		"POST /v1/conversations/{cid}/messages":           s.postMessage,
		"GET /v1/conversations/{cid}/events":              s.getEvents,
		"GET /v1/conversations/{cid}/turns/{tid}":         s.getTurn,
		"POST /v1/conversations/{cid}/turns/{tid}/input":  s.postInput,
		"POST /v1/conversations/{cid}/turns/{tid}/cancel": s.cancelTurn,
		"GET /v1/catalog":                                 s.getCatalog,
		"GET /v1/info":                                    s.getInfo,
		"GET /v1/events":                                  s.getUserEvents,
	}
	mux := http.NewServeMux()
	for _, pattern := range routes {
		mux.Handle(pattern, s.authed(handlers[pattern]))
	}
	mux.HandleFunc("/v1/", s.noRoute)
	return mux
}

// allowed maps a path pattern to the methods docs/api/openapi.yaml routes on it, for the
// 405 of another method; it is made at its first use, not in every cold start.
var allowed = sync.OnceValue(func() *http.ServeMux {
	m := http.NewServeMux()
	methods := map[string][]string{}
	var paths []string
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		if methods[path] == nil {
			paths = append(paths, path)
		}
		methods[path] = append(methods[path], method)
	}
	for _, p := range paths {
		allow := strings.Join(methods[p], ", ")
		m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Allow", allow) })
	}
	return m
})

// EventsHandler serves only the event streams (GET /v1/conversations/{cid}/events
// and the user's GET /v1/events), with the
// same auth: the streaming function on AWS (a Lambda Function URL in
// response-streaming mode; docs/deploy.md), where API Gateway's HTTP API
// cannot stream.
func (s *Server) EventsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/conversations/{cid}/events", s.authed(s.getEvents))
	mux.Handle("GET /v1/events", s.authed(s.getUserEvents))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(http.StatusNotFound, "not_found", "no such route (this endpoint serves only GET /v1/conversations/{cid}/events and GET /v1/events)"))
	})
	return mux
}

// authed checks the bearer token and runs f for its user.
func (s *Server) authed(f func(w http.ResponseWriter, r *http.Request, user string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := s.Auth.Subject(r)
		if errors.Is(err, auth.ErrKeysUnavailable) {
			// The token could not be checked, which says nothing of the
			// token: the client keeps it and tries again.
			s.writeError(w, r, &Error{Status: http.StatusServiceUnavailable, Code: "auth_unavailable",
				Message: "the token issuer's signing keys cannot be fetched right now; try again shortly", RetryAfter: 5 * time.Second})
			return
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="clientagent"`)
			s.writeError(w, r, errorf(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"))
			return
		}
		if err := f(w, r, user); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// noRoute answers a request no route takes: 405 with Allow for a path
// docs/api/openapi.yaml routes with other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	if h, pattern := allowed().Handler(r); pattern != "" {
		h.ServeHTTP(w, r)
		if allow := w.Header().Get("Allow"); allow != "" {
			s.writeError(w, r, errorf(http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow)))
			return
		}
	}
	s.writeError(w, r, errorf(http.StatusNotFound, "not_found", "no such route"))
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Server) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, record.ErrUnavailable):
		s.log().WarnContext(r.Context(), "store unavailable", append([]any{"method", r.Method, "path", r.URL.Path, "error", err.Error()}, metrics.Count(metrics.StoreUnavailable)...)...)
		e = errStoreUnavailable
	case errors.Is(err, record.ErrFull):
		s.log().ErrorContext(r.Context(), "store full", append([]any{"method", r.Method, "path", r.URL.Path, "error", err.Error()}, metrics.Count(metrics.StoreFull)...)...)
		e = errStoreFull
	default:
		s.log().ErrorContext(r.Context(), "api error", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		e = errorf(http.StatusInternalServerError, "internal", "internal error")
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// maxDepth bounds how deeply a request body may nest objects and arrays;
// no route's body needs more, and a deeper one is refused as it streams in,
// before it is read whole.
const maxDepth = 32

var errTooDeep = errorf(http.StatusBadRequest, "invalid_json", fmt.Sprintf("the body is nested deeper than %d levels", maxDepth))

// decode is the one strict JSON reading of every request body: it reads a
// body of at most limit bytes into v: exactly one JSON value (anything but
// white space after it is 400), UTF-8 without lone surrogate escapes, no
// key twice, no null but for values of type any (checkBody), no unknown
// fields (names match exactly: encoding/json alone would take "Text" or
// "teXt" for "text"), at most maxDepth levels deep. Its errors are 400
// invalid_json (413 too_large) with a message for a person.
func decode(r *http.Request, limit int64, v any) error {
	r.Body = http.MaxBytesReader(nil, r.Body, limit)
	dec := json.NewDecoder(&depthReader{r: r.Body})
	var raw json.RawMessage
	err := dec.Decode(&raw)
	if err == nil {
		// One value only: `{"title":"a"} xx` or two objects are not a body.
		var extra json.RawMessage
		switch err = dec.Decode(&extra); {
		case errors.Is(err, io.EOF):
			return decodeStrict(raw, v)
		case err == nil:
			return errorf(http.StatusBadRequest, "invalid_json", "the body has data after its JSON value; send exactly one JSON object")
		}
		if !errors.Is(err, errTooDeep) && !isMaxBytes(err) {
			return errorf(http.StatusBadRequest, "invalid_json", "the body has data after its JSON value; send exactly one JSON object")
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		return errEmptyBody
	case errors.Is(err, errTooDeep):
		return errTooDeep
	case isMaxBytes(err):
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "the request body is too large")
	}
	return jsonError(err)
}

// decodeStrict decodes one JSON value into v, refusing what checkBody
// refuses and fields v does not have, by their exact names.
func decodeStrict(raw json.RawMessage, v any) error {
	if err := checkBody(raw, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return jsonError(err)
	}
	if key := inexactField(tree, reflect.TypeOf(v)); key != "" {
		return unknownField(key)
	}
	return nil
}

// inexactField returns the first object key in tree that is not the exact
// JSON name of a field of t where t is a struct (encoding/json matches
// names without regard to case), or "" when every key is exact.
func inexactField(tree any, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := tree.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for _, e := range x {
				if k := inexactField(e, t.Elem()); k != "" {
					return k
				}
			}
		case reflect.Struct:
			for k, e := range x {
				f, ok := fieldByJSONName(t, k)
				if !ok {
					return k
				}
				if k := inexactField(e, f.Type); k != "" {
					return k
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, e := range x {
				if k := inexactField(e, t.Elem()); k != "" {
					return k
				}
			}
		}
	}
	return ""
}

// fieldByJSONName finds the field of struct t whose JSON name is exactly name.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func isMaxBytes(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// depthReader passes JSON through and fails with errTooDeep as soon as the
// bytes read nest objects or arrays deeper than maxDepth. It follows
// strings and escapes, so brackets inside strings do not count.
type depthReader struct {
	r             io.Reader
	depth         int
	inString, esc bool
}

func (d *depthReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	for _, c := range p[:n] {
		switch {
		case d.esc:
			d.esc = false
		case d.inString:
			switch c {
			case '\\':
				d.esc = true
			case '"':
				d.inString = false
			}
		case c == '"':
			d.inString = true
		case c == '{' || c == '[':
			if d.depth++; d.depth > maxDepth {
				return 0, errTooDeep
			}
		case c == '}' || c == ']':
			d.depth--
		}
	}
	return n, err
}

func newID(prefix string) string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
