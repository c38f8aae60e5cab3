// Package turn is the tool-calling loop of docs/design.md §2–§3, cut into the steps
// the turn state machine (statemachine/turn.asl.json) sequences: LLMStep,
// Validate, Await, Invoke and Append. Each handler reads the conversation
// record once and writes it once; the state machine passes only ids and
// status words. This package must not know about Step Functions or Lambda:
// pkg/turn/turnlambda adapts these handlers for functions/* and the local
// stack. It takes its dependencies as interfaces (record.Store, llm.Provider,
// Invoker, Catalogs, audit.Log, Guardian, Tracing).
package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/metrics"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// Ref names one turn of one conversation; every handler input carries it.
type Ref struct {
	ConversationID string `json:"conversation_id"`
	TurnID         string `json:"turn_id"`
	// Trace is the W3C traceparent of the turn's root span (the API sets
	// it in the execution's input; every state passes it on; "" when
	// tracing is off): each step's span is its child (trace.go).
	Trace string `json:"trace,omitempty"`
	// After names the writes the step follows (record.Query.After): the
	// step before it read ahead for it in its write's round trip
	// (record.ReadAhead), and the state machine passes the token on.
	After Ahead `json:"after,omitempty"`
}

// Ahead is the tokens of the reads ahead a step's input names: one, one
// per call of a batch (the Map's results), or none. JSONata gives a
// single value for a batch of one, so a string is one token.
type Ahead []string

// UnmarshalJSON reads a token, a list of them or null.
func (a *Ahead) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = nil
		if one != "" {
			*a = Ahead{one}
		}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("after: a token or a list of them: %w", err)
	}
	*a = many
	return nil
}

// Next words the handlers return for the state machine's Choice states.
const (
	NextTools  = "tools"  // LLMStep: the model called tools
	NextDone   = "done"   // LLMStep: final answer stored
	NextFailed = "failed" // LLMStep: the turn failed with a message
	NextAwait  = "await"  // Validate/Append: pause for the user
	NextInvoke = "invoke" // Validate: run the ready calls
	NextAppend = "append" // Validate: nothing to run, append results
	NextEnd    = "end"    // Validate: superseded or expired
	NextLLM    = "llm"    // Append: back to the model
)

// Limits bound one turn (docs/design.md §3.6, docs/design.md §10). A limit is checked after
// every LLM call as well as before the next: a response that reaches one
// ends the turn there, and none of its calls runs or asks the user.
type Limits struct {
	MaxLLMCalls int // at most this many LLM calls per turn (12)
	TokenBudget int // input+output tokens per turn; 0 means unlimited
	// CostBudget is the turn's budget in millionths of a US dollar (each
	// call priced at its model's rates, llm.Prices); 0 means none (the
	// default).
	CostBudget int64
	// MaxRepeats: a call (tool and arguments) that returned the same result
	// MaxRepeats-1 times in a row is not run again; the turn ends with no
	// progress (3). A poll whose answer changes is progress.
	MaxRepeats int
	// MaxFailures is the re-plan cap: once a tool's calls failed this many
	// times in one turn, the model calling it again ends the turn (2).
	MaxFailures int
	// TurnTimeout is the turn's wall-clock budget, not counting the time it
	// waits for the user; 0 means none.
	TurnTimeout time.Duration
	Window      int // transcript window in entries (80)
	// AwaitTimeout is how long a form or approval stays open.
	AwaitTimeout time.Duration
	// MaxConcurrency bounds the calls of one batch running at once.
	MaxConcurrency int
}

// DefaultLimits are the bounds of docs/design.md §3.6.
func DefaultLimits() Limits {
	return Limits{MaxLLMCalls: 12, TokenBudget: 200_000, MaxRepeats: 3, MaxFailures: 2, TurnTimeout: 15 * time.Minute,
		Window: 80, AwaitTimeout: 24 * time.Hour, MaxConcurrency: 8}
}

// Catalogs gives the current tool catalogue (capabilities + workflows).
type Catalogs interface {
	Catalog(ctx context.Context) (*catalog.Catalog, error)
}

// Invoker runs one skill call (a specialist's over A2A, an MCP server's
// tool: a tool.Router of their kinds). It never fails: a failing
// specialist is a failed outcome. A workflow's calls do not reach it: a
// workflow.Source runs them, its steps through it.
type Invoker interface {
	Invoke(ctx context.Context, c tool.Call) record.CallOutcome
}

// Guardian is the policy check the steps ask (guard.go);
// *guardian.Checker is one. Check allows a kind that is not Enabled.
type Guardian interface {
	Enabled(k guardian.Kind) bool
	Check(ctx context.Context, in guardian.Input) (guardian.Verdict, error)
}

// Tracing makes the turn's spans (trace.go); *telemetry.Tracing is one.
// Nothing is recorded unless Enabled; Capture says whether prompts,
// arguments and results go into the spans.
type Tracing interface {
	Enabled() bool
	Capture() bool
	// Recording reports whether the operator turned content capture on,
	// traces exported or not: the LLM steps then keep what they sent and
	// got for the owner's inspector.
	Recording() bool
	Tracer() trace.Tracer
	// Remote is ctx as a child of the span of traceparent tp.
	Remote(ctx context.Context, tp string) context.Context
	// EndTurn exports the turn's root span (ids from tp) from start to end.
	EndTurn(ctx context.Context, tp string, start, end time.Time, failed string, attrs ...attribute.KeyValue)
}

// Handlers are the loop's steps. Build one per process and share it.
type Handlers struct {
	Store    record.Store
	LLM      llm.Provider
	Catalogs Catalogs
	Invoker  Invoker
	// Audit keeps decisions and executed calls durably (nil: none).
	Audit audit.Log
	// Events is the conversations' live event log (nil: none).
	Events record.EventLog
	// Live gets each event the log gets, once it is written, for a
	// deployment's push delivery (pkg/livepub: AppSync Events); nil: the
	// log only. It must not block.
	Live LivePublisher
	// Guardian checks requests, the model's output, calls and results
	// (nil: none; guard.go).
	Guardian Guardian
	Limits   Limits
	// CallTimeout is the longest one specialist call may take (the
	// invoker's timeout). A workflow starts its next step in the same
	// invocation only with that much time left before the step's deadline;
	// otherwise it continues in a new one (WorkflowContinuesError). Zero:
	// always in the same invocation.
	CallTimeout time.Duration
	// Prices prices each LLM call by its model (nil: llm.DefaultPrices).
	Prices llm.Prices
	// Tracing makes the turn's spans (nil: none; trace.go).
	Tracing Tracing
	// StoreOutage is how long a step waits, in process, for a store that
	// is unavailable or full before it fails with a TransientError (which
	// the state machine retries for as long again): a write made after
	// a side effect (the model answered, a specialist ran) is retried
	// rather than redone. Zero: DefaultStoreOutage.
	StoreOutage time.Duration
	// StartedAfter is how long an LLM step waits for the model before it
	// writes the call's step.started on its own; an answer that comes
	// sooner carries it in the step's write. Zero: DefaultStartedAfter.
	StartedAfter time.Duration
	// CallLostAfter is how long after a cancel a call that had started
	// before it may still report its outcome (SettleLost). Zero:
	// DefaultCallLostAfter.
	CallLostAfter time.Duration
	Now           func() time.Time
	Logger        *slog.Logger

	// seen is, per turn a step has read, its owner and the status read
	// or written last (seenTurn), so a write that changes the status
	// tells the owner's log (userStatus).
	seen sync.Map
	// told is, per call an LLM step's write started (startedByWrite), when
	// it did: that call's InvokeCall writes and publishes no step.started
	// of its own.
	told toldStarts
}

// toldStarts are the calls whose start an LLM step's write made and
// told, by conversation, turn and call id, until their InvokeCall takes
// them; one no step took (a cancel, a lost execution) goes after a minute
// once more than a few are kept.
type toldStarts struct {
	mu    sync.Mutex
	calls map[string]time.Time
}

func (s *toldStarts) put(key string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]time.Time{}
	}
	if len(s.calls) >= 64 {
		for k, t := range s.calls {
			if at.Sub(t) > time.Minute {
				delete(s.calls, k)
			}
		}
	}
	s.calls[key] = at
}

func (s *toldStarts) take(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.calls[key]
	delete(s.calls, key)
	return ok
}

func startKey(r Ref, callID string) string { return r.ConversationID + "/" + r.TurnID + "/" + callID }

func (h *Handlers) startedAfter() time.Duration {
	if h.StartedAfter > 0 {
		return h.StartedAfter
	}
	return DefaultStartedAfter
}

// DefaultStoreOutage is the store outage a step outlasts in process.
const DefaultStoreOutage = 2 * time.Minute

// outlast runs write until it succeeds, fails for another reason than an
// unavailable or full store, the step's context ends, or StoreOutage has
// passed, backing off from 100 ms to 5 s between tries. It reports how many
// tries were made, so a caller knows that an earlier try may have been
// applied although it timed out.
func (h *Handlers) outlast(ctx context.Context, write func() error) (int, error) {
	budget := h.StoreOutage
	if budget <= 0 {
		budget = DefaultStoreOutage
	}
	end := time.Now().Add(budget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-stepMargin).Before(end) {
		end = dl.Add(-stepMargin)
	}
	wait := 100 * time.Millisecond
	for tries := 1; ; tries++ {
		err := write()
		if err == nil || !(errors.Is(err, record.ErrUnavailable) || errors.Is(err, record.ErrFull)) || time.Now().Add(wait).After(end) {
			return tries, err
		}
		if tries == 1 {
			h.log().WarnContext(ctx, "store unavailable: the step waits for it", "error", err.Error(), "for", time.Until(end).Round(time.Second).String())
		}
		select {
		case <-ctx.Done():
			return tries, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// TransientError marks a failure worth retrying (Valkey unreachable, LLM
// rate limited). The state machine retries it by this type name.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// CancelledError ends a step of a turn the user cancelled while it ran
// (Handlers.Cancel); its execution is stopped at the same time.
type CancelledError struct{ TurnID string }

func (e *CancelledError) Error() string { return "turn " + e.TurnID + " was cancelled" }

// WorkflowContinuesError ends an invoke step that ran some of a workflow's
// steps and has too little time left for the next: the finished steps are
// stored, and the state machine retries the step by this name, which
// resumes at step Next. A workflow is thus never cut short by one Lambda's
// timeout, and a retried step never reruns a finished one.
type WorkflowContinuesError struct {
	CallID string
	Next   int // 0-based
}

func (e *WorkflowContinuesError) Error() string {
	return fmt.Sprintf("workflow call %s continues at step %d in a new invocation", e.CallID, e.Next+1)
}

// ModelUnavailableError is an LLM provider that kept answering 429 or 5xx
// through its own retries; the state machine retries the step by this name,
// and a turn that still cannot reach the model says so.
type ModelUnavailableError struct{ Err error }

func (e *ModelUnavailableError) Error() string { return e.Err.Error() }
func (e *ModelUnavailableError) Unwrap() error { return e.Err }

// ProviderError is an LLM failure that retrying will not fix.
type ProviderError struct{ Err error }

func (e *ProviderError) Error() string { return e.Err.Error() }
func (e *ProviderError) Unwrap() error { return e.Err }

// NotFoundError is a turn or call the record does not have.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What + " not found" }

// guardian is h.Guardian, or one that checks nothing.
func (h *Handlers) guardian() Guardian {
	if h.Guardian == nil {
		return noGuardian{}
	}
	return h.Guardian
}

// tracing is h.Tracing, or one that records nothing.
func (h *Handlers) tracing() Tracing {
	if h.Tracing == nil {
		return noTracing{}
	}
	return h.Tracing
}

type noGuardian struct{}

func (noGuardian) Enabled(guardian.Kind) bool { return false }
func (noGuardian) Check(context.Context, guardian.Input) (guardian.Verdict, error) {
	return guardian.Verdict{Decision: guardian.Decision{Action: guardian.Allow}}, nil
}

type noTracing struct{}

func (noTracing) Enabled() bool                                        { return false }
func (noTracing) Capture() bool                                        { return false }
func (noTracing) Recording() bool                                      { return false }
func (noTracing) Tracer() trace.Tracer                                 { return noop.NewTracerProvider().Tracer("") }
func (noTracing) Remote(ctx context.Context, _ string) context.Context { return ctx }
func (noTracing) EndTurn(context.Context, string, time.Time, time.Time, string, ...attribute.KeyValue) {
}

func (h *Handlers) now() time.Time {
	if h.Now != nil {
		return h.Now().UTC()
	}
	return time.Now().UTC()
}

func (h *Handlers) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// load reads what a step of turn r needs in one round trip
// (record.Store.LoadStep): the turn and, when withOutcomes, its stored
// call outcomes.
func (h *Handlers) load(ctx context.Context, r Ref, withOutcomes bool) (*record.Conversation, *record.Turn, map[string]record.CallOutcome, error) {
	return h.read(ctx, r, record.Query{TurnID: r.TurnID, Outcomes: withOutcomes}, true)
}

// batchQuery is the read of ValidateBatch and AppendResults (load with
// outcomes), for a write before them to read ahead.
func batchQuery(r Ref) *record.Query {
	return &record.Query{TurnID: r.TurnID, Outcomes: true}
}

// llmQuery is loadForLLM's read, for a write before it to read ahead.
func (h *Handlers) llmQuery(r Ref) *record.Query {
	q := h.Limits.LLMQuery(r.TurnID)
	return &q
}

// LLMQuery is an LLM step's read of turn tid (record.Store.LoadStep):
// the turn and the turns of its transcript window (all of them when
// Window <= 0). The API's first write of a turn reads it ahead.
func (l Limits) LLMQuery(tid string) record.Query {
	window := l.Window
	if window <= 0 {
		window = math.MaxInt32
	}
	return record.Query{TurnID: tid, Window: window}
}

// loadForLLM is load for an LLM call: also the turns of the transcript
// window (all of them when Limits.Window <= 0, no window).
func (h *Handlers) loadForLLM(ctx context.Context, r Ref) (*record.Conversation, *record.Turn, error) {
	conv, t, _, err := h.read(ctx, r, *h.llmQuery(r), true)
	return conv, t, err
}

// read loads what q names. With finish, a turn whose cancel is marked but
// not yet written (a crash between the two) is first cancelled for good
// (finishCancel), so every step and reader sees it ended.
func (h *Handlers) read(ctx context.Context, r Ref, q record.Query, finish bool) (*record.Conversation, *record.Turn, map[string]record.CallOutcome, error) {
	q.After = r.After // what the write before read ahead, if the store kept it
	conv, outcomes, err := h.Store.LoadStep(ctx, r.ConversationID, q)
	return h.found(ctx, r, q, finish, conv, outcomes, err)
}

// loadStart is load with outcomes, and the start of a call in the same
// round trip (record.Store.LoadStart): started reports whether the store
// started it.
func (h *Handlers) loadStart(ctx context.Context, r Ref, start record.Start) (conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome, started bool, err error) {
	q := record.Query{TurnID: r.TurnID, Outcomes: true}
	conv, outcomes, started, err = h.Store.LoadStart(ctx, r.ConversationID, q, start)
	conv, t, outcomes, err = h.found(ctx, r, q, true, conv, outcomes, err)
	return conv, t, outcomes, started, err
}

// found is what read makes of a LoadStep's answer.
func (h *Handlers) found(ctx context.Context, r Ref, q record.Query, finish bool, conv *record.Conversation, outcomes map[string]record.CallOutcome, err error) (*record.Conversation, *record.Turn, map[string]record.CallOutcome, error) {
	if errors.Is(err, record.ErrNotFound) {
		return nil, nil, nil, &NotFoundError{What: "conversation " + r.ConversationID}
	}
	if err != nil {
		return nil, nil, nil, &TransientError{Err: fmt.Errorf("load conversation %s: %w", r.ConversationID, err)}
	}
	t, ok := conv.Turn(r.TurnID)
	if !ok {
		return nil, nil, nil, &NotFoundError{What: "turn " + r.TurnID}
	}
	if finish && t.CancelRequested && !t.Status.Final() {
		if _, _, err := h.finishCancel(ctx, r, "", false); err != nil {
			return nil, nil, nil, err
		}
		return h.read(ctx, r, q, false)
	}
	if q.Outcomes && outcomes == nil {
		outcomes = map[string]record.CallOutcome{}
	}
	if h.events().Enabled() && !t.Status.Final() {
		h.seen.Store(t.ID, seenTurn{owner: conv.Meta.Owner, status: t.Status})
	}
	return conv, t, outcomes, nil
}

// ResolveArtifacts adds to conv's catalog the artifacts that turn t's
// calls (and extra values, e.g. a user's edited arguments) name but the
// step did not read: a step reads only the newest of a long catalog, and
// validation and invocation must know every artifact a call names. It
// makes a round trip only when a call names an artifact not read.
func ResolveArtifacts(ctx context.Context, store record.Store, conv *record.Conversation, t *record.Turn, extra ...any) error {
	if conv.ArtifactTotal == 0 {
		return nil // the whole catalog was read
	}
	known := make(map[string]bool, len(conv.Artifacts))
	for _, a := range conv.Artifacts {
		known[a.ID] = true
	}
	var missing []string
	walk := func(v any) {
		tool.EachString(v, func(s string) {
			if artifact.LooksLikeID(s) && !known[s] {
				known[s] = true
				missing = append(missing, s)
			}
		})
	}
	for _, pc := range t.Pending {
		walk(pc.Arguments)
	}
	if last, ok := lastAssistant(t); ok {
		for _, c := range last.ToolCalls {
			var args any
			if json.Unmarshal([]byte(c.Arguments), &args) == nil {
				walk(args)
			}
		}
	}
	for _, id := range t.Files {
		walk(id)
	}
	for _, v := range extra {
		walk(v)
	}
	if len(missing) == 0 {
		return nil
	}
	arts, err := store.Artifacts(ctx, conv.Meta.ID, missing...)
	if err != nil {
		return &TransientError{Err: fmt.Errorf("read artifacts of %s: %w", conv.Meta.ID, err)}
	}
	conv.Artifacts = append(conv.Artifacts, arts...)
	return nil
}

func (h *Handlers) save(ctx context.Context, r Ref, t *record.Turn, arts ...artifact.Artifact) error {
	_, err := h.saveAhead(ctx, r, t, nil, arts...)
	return err
}

// saveAhead is save, and when next is set and the store reads ahead
// (record.ReadAhead), the read of the step that follows in the write's
// round trip: the token is what that step's input names (Ref.After).
func (h *Handlers) saveAhead(ctx context.Context, r Ref, t *record.Turn, next *record.Query, arts ...artifact.Artifact) (string, error) {
	t.UpdatedAt = h.now()
	token, err := h.writeAhead(ctx, r, t, next, arts...)
	if err != nil {
		return "", err
	}
	if t.Status.Final() {
		// Steps return early on an ended turn, so this runs once per turn.
		h.turnEnded(ctx, r, t)
	}
	return token, nil
}

// write stores t as it is, with the events of the write, waiting out a
// store that is away (outlast); save is write for a step, which also
// stamps the update and ends the turn's trace once.
func (h *Handlers) write(ctx context.Context, r Ref, t *record.Turn, arts ...artifact.Artifact) error {
	_, err := h.writeAhead(ctx, r, t, nil, arts...)
	return err
}

// writeAhead is write, reading next ahead as saveAhead says.
func (h *Handlers) writeAhead(ctx context.Context, r Ref, t *record.Turn, next *record.Query, arts ...artifact.Artifact) (string, error) {
	token, _, err := h.writeStarting(ctx, r, t, next, nil, arts...)
	return token, err
}

// writeStarting is writeAhead that also starts start's call after the
// write, in its round trip, when start is set and the Store can
// (record.StartingSave); started says whether it did.
func (h *Handlers) writeStarting(ctx context.Context, r Ref, t *record.Turn, next *record.Query, start *record.Start, arts ...artifact.Artifact) (token string, started bool, err error) {
	ra, _ := h.Store.(record.ReadAhead)
	ss, _ := h.Store.(record.StartingSave)
	log := h.events()
	if log.Enabled() {
		// The write's events go in its own round trip.
		t.Events = append(t.Events, h.savedEvents(t, arts)...)
	}
	_, err = h.outlast(ctx, func() (err error) {
		switch {
		case ss != nil && next != nil && start != nil:
			token, started, err = ss.SaveTurnStarting(ctx, r.ConversationID, t, *next, *start, arts...)
			return err
		case ra != nil && next != nil:
			token, err = ra.SaveTurnAhead(ctx, r.ConversationID, t, *next, arts...)
			return err
		}
		return h.Store.SaveTurn(ctx, r.ConversationID, t, arts...)
	})
	if started {
		t.Events = append(t.Events, start.Events...) // published with the write's, as the log got them
	}
	if err == nil {
		var evs []record.Event
		if t.Spend != nil {
			evs = append(evs, t.Spend.Events...) // first, as the write appends them
		}
		log.Publish(ctx, r.ConversationID, append(evs, t.Events...)...)
	}
	t.Events = nil
	if sp := t.Spend; sp != nil {
		t.Spend = nil
		if errors.Is(err, record.ErrCancelled) {
			// The cancel refused the write, and its events with it; the
			// call's spend still counted (the script counts it first). The
			// page shows that spend on the stopped LLM row once it hears
			// the step ended (and began, when that rode on the write); the
			// text the call streamed after the stop stays unseen.
			var ended []record.Event
			for _, e := range sp.Events {
				if e.Type == record.EventStepStarted || e.Type == record.EventStepEnded {
					ended = append(ended, e)
				}
			}
			h.emit(context.WithoutCancel(ctx), r.ConversationID, ended...)
		}
		if err != nil && !errors.Is(err, record.ErrNotFound) && !errors.Is(err, record.ErrCancelled) {
			// The provider call happened and the write that carried its
			// spend did not land: it is counted on its own, once, so a
			// retried step counts each real call.
			sp.Events = nil
			if serr := h.Store.AddSpend(context.WithoutCancel(ctx), r.ConversationID, r.TurnID, *sp); serr != nil {
				h.log().WarnContext(ctx, "spend not counted", "conversation", r.ConversationID, "turn", t.ID, "error", serr.Error())
			}
		}
	}
	if err == nil {
		h.userStatus(ctx, r, t)
	}
	if errors.Is(err, record.ErrNotFound) {
		return "", false, &NotFoundError{What: "conversation " + r.ConversationID} // deleted while the turn ran
	} else if errors.Is(err, record.ErrCancelled) {
		// The user cancelled the turn while this step ran: its work is
		// dropped, and the execution is being stopped.
		return "", false, &CancelledError{TurnID: t.ID}
	} else if err != nil {
		if errors.Is(err, record.ErrFull) {
			// The ops signal of a full store: the turn waits for the state
			// machine's retries, and reads keep working meanwhile.
			h.log().ErrorContext(ctx, "store full", append([]any{"conversation", r.ConversationID, "turn", t.ID, "error", err.Error()}, metrics.Count(metrics.StoreFull)...)...)
		}
		return "", false, &TransientError{Err: fmt.Errorf("save turn %s: %w", t.ID, err)}
	}
	return token, started, nil
}

func (h *Handlers) catalog(ctx context.Context) (*catalog.Catalog, error) {
	c, err := h.Catalogs.Catalog(ctx)
	if err != nil {
		return nil, &TransientError{Err: fmt.Errorf("tool catalogue: %w", err)}
	}
	return c, nil
}

// Env is what validation of turn t may consult: the artifact catalog known
// now and the values the platform fills from context. The API validates
// form answers with the same Env before handing them to the execution.
func Env(conv *record.Conversation, t *record.Turn) catalog.Env {
	e := catalog.NewEnv(conv.Artifacts, map[string]any{
		"conversation_id": conv.Meta.ID,
		"user_id":         conv.Meta.Owner,
		"turn_id":         t.ID,
	})
	if t.Workflow != nil {
		e.UserCalls = map[string]bool{SelectionCallID(t.ID): true}
	}
	return e
}

// CallID is the stored id of the n-th tool call (1-based) of turn turnID.
// Ids are ours, never the provider's: results are stored and matched by
// call id, providers may send empty or constant ids (call_0), and
// concurrent turns cannot see each other's ids before they are stored, so
// an id is unique by construction because it carries its turn.
func CallID(turnID string, n int) string { return fmt.Sprintf("call_%s_%d", turnID, n) }

// SelectionCallID is the id of the synthetic call an explicit workflow
// selection makes in turn turnID (docs/design.md §3.4).
func SelectionCallID(turnID string) string { return "call_wf_" + turnID }

// stepLog writes the structured line of one step (docs/design.md §8).
func (h *Handlers) stepLog(ctx context.Context, r Ref, step, tool, status string, started time.Time, tokens int, err error) {
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
	}
	log := h.log()
	if !log.Enabled(ctx, level) {
		return // nothing built on the hot path when the line is not written
	}
	attrs := []any{
		slog.String("conversation", r.ConversationID),
		slog.String("turn", r.TurnID),
		slog.String("step", step),
		slog.String("status", status),
		slog.Int64("latency_ms", time.Since(started).Milliseconds()),
	}
	if tool != "" {
		attrs = append(attrs, slog.String("tool", tool))
	}
	if tokens > 0 {
		attrs = append(attrs, slog.Int("tokens", tokens))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	log.Log(ctx, level, "step", attrs...)
}

func lastMessage(t *record.Turn) (llm.Message, bool) {
	if len(t.Messages) == 0 {
		return llm.Message{}, false
	}
	return t.Messages[len(t.Messages)-1], true
}

func findCall(t *record.Turn, id string) *record.PendingCall {
	for i := range t.Pending {
		if t.Pending[i].CallID == id {
			return &t.Pending[i]
		}
	}
	return nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// seenTurn is what Handlers.seen keeps of a turn.
type seenTurn struct {
	owner  string
	status record.Status
}

// userStatus tells the owner's log (record.UserLog) that turn t's status
// changed, so their conversation list follows it live: a pause, its
// answer, the end. It goes through the same event log as the
// conversation's events; a turn ended is forgotten.
func (h *Handlers) userStatus(ctx context.Context, r Ref, t *record.Turn) {
	v, ok := h.seen.Load(t.ID)
	if !ok {
		return
	}
	prev := v.(seenTurn)
	if t.Status.Final() {
		h.seen.Delete(t.ID)
	} else {
		h.seen.Store(t.ID, seenTurn{owner: prev.owner, status: t.Status})
	}
	if prev.status == t.Status {
		return
	}
	h.emit(ctx, record.UserLog(prev.owner), record.Event{Type: record.EventConversationStatus, TurnID: t.ID, At: h.now(),
		Data: map[string]any{"conversation_id": r.ConversationID, "status": t.Status}})
}
