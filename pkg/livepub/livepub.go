// Package livepub publishes a conversation's live events to an AWS AppSync
// Events API (docs/deploy.md, "Live events on AWS"): the steps append each
// event to the conversation's event log in Valkey and also hand it to a
// Publisher, which posts it over HTTPS to the owner's channel; the page and
// the CLI subscribe to that channel over AppSync's WebSocket with their JWT.
//
// Publishing is best effort and must never hold up or fail a step: Publish
// only queues, a full queue drops (counted), and a failed post is logged
// and counted. The event log and the turn record stay the truth; a client
// that missed events re-reads the turn when it (re)subscribes.
package livepub

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clientagent/clientagent/pkg/keepalive"
	"github.com/clientagent/clientagent/pkg/livesub"
	"github.com/clientagent/clientagent/pkg/metrics"
	"github.com/clientagent/clientagent/pkg/record"
)

// AppSync Events bounds of one HTTP publish: at most 5 events, each a JSON
// string of at most 240 KB.
const (
	MaxBatch     = 5
	MaxEventSize = 240 << 10
)

// EventResync is the event published instead of one too large to publish:
// the client re-reads the turn it names (GET …/turns/{tid}).
const EventResync = "resync"

// DefaultNamespace is the channel namespace the stack creates.
const DefaultNamespace = "live"

// Channel and ConversationSegment are the subscribers' (pkg/livesub).
var (
	Channel             = livesub.Channel
	ConversationSegment = livesub.ConversationSegment
)

// Owners finds a conversation's owner (the valkey store's Owner).
type Owners interface {
	Owner(ctx context.Context, cid string) (string, error)
}

// Publisher posts events to an AppSync Events API's HTTP endpoint. Its
// zero value is not usable: fill Endpoint, Owners and Client, then Start.
type Publisher struct {
	// Endpoint is the API's HTTP publish URL, https://<http domain>/event.
	Endpoint string
	// Namespace is the channel namespace (empty: DefaultNamespace).
	Namespace string
	// Owners finds the owner of a conversation, once per conversation.
	Owners Owners
	// Client sends the posts; it signs them (SigV4, service appsync) or
	// adds an authorization header (agents.SigV4ServiceClient).
	Client *http.Client
	// Timeout bounds one post (zero: 5 s).
	Timeout time.Duration
	// Queue is how many events may wait (zero: 4096); past it Publish drops.
	Queue  int
	Logger *slog.Logger

	published, failed, dropped atomic.Int64

	once    sync.Once
	queue   chan item
	pending sync.WaitGroup // queued and not yet posted or dropped

	mu     sync.Mutex
	owners map[string]string
}

type item struct {
	cid string
	ev  record.Event
}

// Stats are counts since Start: events posted and accepted, events that
// could not be posted (a failed request or a refusal), events dropped
// because the queue was full or the conversation has no channel.
type Stats struct{ Published, Failed, Dropped int64 }

// Stats returns the counts so far.
func (p *Publisher) Stats() Stats {
	return Stats{p.published.Load(), p.failed.Load(), p.dropped.Load()}
}

// Start starts the goroutine that posts what is queued, until ctx ends.
func (p *Publisher) Start(ctx context.Context) *Publisher {
	p.once.Do(func() {
		n := p.Queue
		if n <= 0 {
			n = 4096
		}
		p.queue = make(chan item, n)
		p.owners = map[string]string{}
		go p.run(ctx)
	})
	return p
}

// Publish queues evs for cid's channel and returns at once. It never
// blocks: a full queue drops the events (counted; logged at the first drop
// and every 100th).
func (p *Publisher) Publish(ctx context.Context, cid string, evs ...record.Event) {
	if p == nil || p.queue == nil {
		return
	}
	for _, e := range evs {
		p.pending.Add(1)
		select {
		case p.queue <- item{cid, e}:
		default:
			p.pending.Done()
			// Logged at the first drop and every 100th, not per event.
			if n := p.dropped.Add(1); n == 1 || n%100 == 0 {
				p.log().WarnContext(ctx, "live events dropped: queue full", append([]any{"conversation", cid, "dropped", n}, metrics.Count(metrics.LivePublishFailed)...)...)
			}
		}
	}
}

// Flush waits until every event queued so far is posted (or given up), or
// ctx ends. A Lambda calls it at the end of each invocation, before it is
// frozen.
func (p *Publisher) Flush(ctx context.Context) error {
	if p == nil || p.queue == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { p.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flush live events: %w", ctx.Err())
	}
}

func (p *Publisher) log() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// run posts the queue in order, up to MaxBatch consecutive events of one
// conversation per request, so a conversation's events keep their order.
func (p *Publisher) run(ctx context.Context) {
	var batch []item
	for {
		var first item
		select {
		case <-ctx.Done():
			return
		case first = <-p.queue:
		}
		batch = append(batch[:0], first)
	more:
		for len(batch) < MaxBatch {
			select {
			case it := <-p.queue:
				if it.cid != first.cid {
					p.post(ctx, batch)
					batch = append(batch[:0], it)
					first = it
					continue
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		p.post(ctx, batch)
		batch = batch[:0]
	}
}

// post sends one request for batch (all of one conversation) and settles
// its events.
func (p *Publisher) post(ctx context.Context, batch []item) {
	defer p.pending.Add(-len(batch))
	cid := batch[0].cid
	ns := p.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	var channel string
	var ok bool
	if enc, user := strings.CutPrefix(cid, "u_"); user {
		// A user's own log (record.UserLog) names its owner.
		owner, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			p.fail(ctx, cid, len(batch), fmt.Errorf("user log: %w", err))
			return
		}
		channel, ok = livesub.UserChannel(ns, string(owner))
	} else {
		owner, err := p.owner(ctx, cid)
		if err != nil {
			p.fail(ctx, cid, len(batch), fmt.Errorf("owner: %w", err))
			return
		}
		channel, ok = Channel(ns, owner, cid)
	}
	if !ok {
		p.dropped.Add(int64(len(batch)))
		p.log().WarnContext(ctx, "live events dropped: no channel for this owner or conversation", "conversation", cid)
		return
	}
	events := make([]string, 0, len(batch))
	for _, it := range batch {
		b, err := json.Marshal(it.ev)
		if err == nil && len(b) > MaxEventSize {
			b, err = json.Marshal(record.Event{Type: EventResync, TurnID: it.ev.TurnID, At: it.ev.At, Data: map[string]any{"reason": it.ev.Type + " too large to publish"}})
		}
		if err != nil {
			p.fail(ctx, cid, 1, fmt.Errorf("marshal %s: %w", it.ev.Type, err))
			continue
		}
		events = append(events, string(b))
	}
	if len(events) == 0 {
		return
	}
	body, _ := json.Marshal(map[string]any{"channel": channel, "events": events})
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.send(rctx, body, len(events)); err != nil {
		p.fail(ctx, cid, len(events), err)
		return
	}
	p.published.Add(int64(len(events)))
}

// publishAnswer is AppSync's answer to a publish: which events it took.
type publishAnswer struct {
	Successful []struct {
		Index int `json:"index"`
	} `json:"successful"`
	Failed []struct {
		Index   int    `json:"index"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"failed"`
}

func (p *Publisher) send(ctx context.Context, body []byte, n int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := p.Client
	if c == nil {
		c = keepalive.Client()
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("publish: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var a publishAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("publish: answer %q: %w", b, err)
	}
	if len(a.Failed) > 0 {
		return fmt.Errorf("publish: %d of %d events refused: %s", len(a.Failed), n, a.Failed[0].Message)
	}
	return nil
}

func (p *Publisher) fail(ctx context.Context, cid string, n int, err error) {
	p.failed.Add(int64(n))
	p.log().WarnContext(ctx, "live events not published", append([]any{"conversation", cid, "events", n, "error", err.Error()}, metrics.Count(metrics.LivePublishFailed)...)...)
}

// owner is cid's owner, looked up once per conversation (an owner never
// changes). The cache is bounded by dropping it whole when it is full.
func (p *Publisher) owner(ctx context.Context, cid string) (string, error) {
	p.mu.Lock()
	o, ok := p.owners[cid]
	p.mu.Unlock()
	if ok {
		return o, nil
	}
	if p.Owners == nil {
		return "", errors.New("no owner lookup")
	}
	o, err := p.Owners.Owner(ctx, cid)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	if len(p.owners) >= 10000 {
		clear(p.owners)
	}
	p.owners[cid] = o
	p.mu.Unlock()
	return o, nil
}

// Known records that cid belongs to owner, sparing the lookup (the API
// knows it when it starts a turn).
func (p *Publisher) Known(cid, owner string) {
	if p == nil || p.owners == nil {
		return
	}
	p.mu.Lock()
	p.owners[cid] = owner
	p.mu.Unlock()
}
