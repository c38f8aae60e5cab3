package turn

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/record"
)

// emit appends evs to the conversation's event log (issue 15). The log is
// for live pages and the record stays the truth, so an event that cannot
// be written is logged and the step carries on.
func (h *Handlers) emit(ctx context.Context, cid string, evs ...record.Event) {
	if len(evs) == 0 {
		return
	}
	log := h.events()
	if err := log.Emit(ctx, cid, evs...); err != nil {
		h.log().WarnContext(ctx, "events not written", "conversation", cid, "events", len(evs), "error", err.Error())
	}
	log.Publish(ctx, cid, evs...)
}

// DefaultStartedAfter is how long an LLM step waits for the model's
// answer before it writes the call's step.started on its own
// (Handlers.StartedAfter). A model that answers sooner (a cached or small
// one, the scripted model of the benchmarks) has the event ride on the
// step's own write, first among its events, so the step makes one round
// trip less; one that thinks longer, as a hosted model does, has it
// written while it thinks. A page hears of the step at most this much
// later than it began, and never after the step's end.
const DefaultStartedAfter = 10 * time.Millisecond

// later is an event written beside a step's work once the step has waited
// a while for something slower (the model), unless the step takes it for
// its own write first. Whoever stops its timer first owns the events: the
// timer writes them, or wait does, or take hands them to the step's write.
// Every write of the step's events comes after a wait or a take, so the
// log keeps their order. A nil *later is no event.
type later struct {
	h     *Handlers
	ctx   context.Context
	cid   string
	evs   []record.Event
	timer *time.Timer
	done  chan struct{} // closed once written, or taken
}

// emitLater writes evs after wait, beside the step.
func (h *Handlers) emitLater(ctx context.Context, cid string, wait time.Duration, evs ...record.Event) *later {
	l := &later{h: h, ctx: ctx, cid: cid, evs: evs, done: make(chan struct{})}
	l.timer = time.AfterFunc(wait, l.write)
	return l
}

func (l *later) write() {
	l.h.emit(l.ctx, l.cid, l.evs...)
	close(l.done)
}

// wait writes the events now unless they were written or taken, and
// returns once they are: before a write of the step's that must follow
// them (the streamed text's).
func (l *later) wait() {
	if l == nil {
		return
	}
	if l.timer.Stop() {
		l.write()
	}
	<-l.done
}

// take returns the events for the step's own write, first among its
// events, when they have not been written yet; otherwise it returns nil
// once they are written.
func (l *later) take() []record.Event {
	if l == nil {
		return nil
	}
	if l.timer.Stop() {
		close(l.done)
		return l.evs
	}
	<-l.done
	return nil
}

// LivePublisher pushes a conversation's events to its live subscribers
// (livepub.Publisher). Publish queues and returns: it never blocks a step,
// and what it fails to deliver a client reads from the turn.
type LivePublisher interface {
	Publish(ctx context.Context, cid string, evs ...record.Event)
}

// eventLog is where the steps tell what happens: the conversations' event
// log, each event it gets also pushed live. Nothing is kept unless
// Enabled, and a step builds the events that ride on its own writes only
// then.
type eventLog interface {
	Enabled() bool
	record.EventLog
	// Publish pushes events a store write appended to the log (no Emit).
	LivePublisher
}

// events is h.Events with h.Live, or a log that keeps nothing.
func (h *Handlers) events() eventLog {
	if h.Events == nil {
		return noEvents{}
	}
	return liveLog{EventLog: h.Events, live: h.Live}
}

// liveLog is an event log whose events are pushed to live (nil: none).
type liveLog struct {
	record.EventLog
	live LivePublisher
}

func (liveLog) Enabled() bool { return true }

func (l liveLog) Publish(ctx context.Context, cid string, evs ...record.Event) {
	if l.live != nil && len(evs) > 0 {
		l.live.Publish(ctx, cid, evs...)
	}
}

type noEvents struct{}

func (noEvents) Enabled() bool                                       { return false }
func (noEvents) Emit(context.Context, string, ...record.Event) error { return nil }
func (noEvents) Events(context.Context, string, string, int, time.Duration) ([]record.Event, error) {
	return nil, nil
}
func (noEvents) Publish(context.Context, string, ...record.Event) {}

func (h *Handlers) live(typ, turnID string, data map[string]any) record.Event {
	return record.Event{Type: typ, TurnID: turnID, At: h.now(), Data: data}
}

// stepEnded is the step.ended event of a step (tool "llm" for a model
// call) that ran from started to ended.
func (h *Handlers) stepEnded(turnID, tool, callID, status string, started, ended time.Time, extra map[string]any) record.Event {
	d := map[string]any{"tool": tool, "status": status, "started_at": started.UTC().Format(record.TimeLayout),
		"ended_at": ended.UTC().Format(record.TimeLayout), "duration_ms": ended.Sub(started).Milliseconds()}
	if callID != "" {
		d["call_id"] = callID
	}
	for k, v := range extra {
		d[k] = v
	}
	return h.live(record.EventStepEnded, turnID, d)
}

// savedEvents are the events a write of turn t tells: the artifacts it
// adds to the catalog and, once it has ended, turn.ended.
func (h *Handlers) savedEvents(t *record.Turn, arts []artifact.Artifact) []record.Event {
	var evs []record.Event
	for _, a := range arts {
		evs = append(evs, h.live(record.EventArtifact, t.ID, map[string]any{"artifact": a.Ref()}))
	}
	if t.Status.Final() {
		reply := t.FinalReport
		if t.Status != record.StatusSucceeded {
			reply = t.Error
		}
		evs = append(evs, h.live(record.EventTurnEnded, t.ID, map[string]any{
			"status": t.Status, "reply": reply, "llm_calls": t.LLMCalls, "tokens": t.Tokens,
			"cached_tokens": t.CachedTokens, "cost_usd": float64(t.CostMicros) / 1e6}))
	}
	return evs
}

// Text deltas are written in batches: at most every deltaEvery, or
// deltaChunks chunks, so a streaming model does not hit Valkey per token.
const (
	deltaEvery  = 50 * time.Millisecond
	deltaChunks = 32
)

// deltas batches an LLM call's streamed text into llm.delta events. Each
// event's offset is where its text starts in the call's answer, in
// Unicode code points; after a reset (the provider retried) it starts at
// 0 again, so a reader replaces what it had.
type deltas struct {
	h       *Handlers
	ctx     context.Context
	cid     string
	turnID  string
	llmCall int
	// after, when set, is waited on before the first write: the call's
	// step.started (emitLater) comes first in the log.
	after func()

	// check, when set, checks each batch with the tail of what was shown
	// before it is shown (outputCheck).
	check func(window string) (guardian.Verdict, error)

	mu      sync.Mutex
	held    bool // the text waits for the guardian's check of the request
	buf     []byte
	chunks  int
	offset  int // of buf's start
	pending *time.Timer
	tail    []byte // the end of what was shown, at most windowTail bytes
	shown   bool   // something of this call's answer was shown
	// stopped is set when the check of the stream did not allow a batch:
	// nothing more is shown, and the step ends the turn (stopVerdict).
	stopped bool
	stopV   guardian.Verdict
	stopErr error
}

// windowTail is how much of the text already shown is checked again with
// each new batch, so a word split over batches ("for" "bid" "den") is seen
// whole. It bounds each check's size whatever the answer's length.
const windowTail = 1024

func (h *Handlers) newDeltas(ctx context.Context, r Ref, llmCall int) *deltas {
	if !h.events().Enabled() {
		return nil
	}
	return &deltas{h: h, ctx: ctx, cid: r.ConversationID, turnID: r.TurnID, llmCall: llmCall}
}

// text takes one streamed chunk.
func (d *deltas) text(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buf = append(d.buf, s...)
	d.chunks++
	if d.chunks >= deltaChunks {
		d.flushLocked()
		return
	}
	if d.pending == nil {
		d.pending = time.AfterFunc(deltaEvery, d.flush)
	}
}

// hold keeps the text back until release: an answer to a request the
// guardian may still block is not shown.
func (d *deltas) hold() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.held = true
	d.mu.Unlock()
}

// release writes what was held and lets the rest through.
func (d *deltas) release() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = false
	d.flushLocked()
}

// reset drops what was not written and starts the answer again.
func (d *deltas) reset() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
	d.buf, d.chunks, d.offset, d.tail = nil, 0, 0, nil
}

func (d *deltas) flush() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flushLocked()
}

// drain returns what is buffered as an event to write with the step's
// next write, instead of writing it on its own.
func (d *deltas) drain() []record.Event {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
	if len(d.buf) == 0 || !d.allowedLocked() {
		return nil
	}
	ev := d.event()
	return []record.Event{ev}
}

// event is the llm.delta of what is buffered; it moves the offset past it.
func (d *deltas) event() record.Event {
	text := string(d.buf)
	ev := d.h.live(record.EventLLMDelta, d.turnID, map[string]any{"text": text, "offset": d.offset, "llm_call": d.llmCall})
	d.offset += utf8.RuneCountInString(text)
	d.shown = true
	d.tail = append(d.tail, d.buf...)
	if over := len(d.tail) - windowTail; over > 0 {
		for over < len(d.tail) && !utf8.RuneStart(d.tail[over]) {
			over++
		}
		d.tail = append(d.tail[:0], d.tail[over:]...)
	}
	d.buf, d.chunks = d.buf[:0], 0
	return ev
}

func (d *deltas) flushLocked() {
	d.stopLocked()
	if len(d.buf) == 0 || d.held || !d.allowedLocked() {
		return
	}
	if d.after != nil {
		d.after()
	}
	d.h.emit(d.ctx, d.cid, d.event())
}

// allowedLocked checks what is buffered, with the tail of what was shown,
// as model output. A batch that is not allowed (or that the guardian could
// not check) stops the stream: it is never shown, nor is anything after it.
func (d *deltas) allowedLocked() bool {
	if d.stopped {
		return false
	}
	if d.check == nil {
		return true
	}
	v, err := d.check(string(d.tail) + string(d.buf))
	if err == nil && v.Action == guardian.Allow {
		return true
	}
	d.stopped, d.stopV, d.stopErr = true, v, err
	d.buf, d.chunks = nil, 0
	return false
}

// stopVerdict reports whether the check of the stream stopped it, and why.
func (d *deltas) stopVerdict() (bool, guardian.Verdict, error) {
	if d == nil {
		return false, guardian.Verdict{}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopped, d.stopV, d.stopErr
}

// retract takes back what was shown of the answer: an empty llm.delta at
// offset 0, which the page and the CLI read as a restart, so the text is
// cleared. Nothing is shown after it.
func (d *deltas) retract() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
	d.buf, d.chunks, d.tail, d.stopped = nil, 0, nil, true
	if d.shown {
		d.h.emit(d.ctx, d.cid, d.h.live(record.EventLLMDelta, d.turnID, map[string]any{"text": "", "offset": 0, "llm_call": d.llmCall, "retracted": true}))
		d.shown, d.offset = false, 0
	}
}

// replace shows text instead of what was shown (a redacted answer): it is
// written at offset 0 with the step's next write (drain).
func (d *deltas) replace(text string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
	d.buf, d.chunks, d.offset, d.tail, d.held, d.stopped, d.check = []byte(text), 0, 0, nil, false, false, nil
}

func (d *deltas) stopLocked() {
	if d.pending != nil {
		d.pending.Stop()
		d.pending = nil
	}
}
