package valkey

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
)

// A reader of the event log waits for a wake-up, not on the server: every
// write that appends events also PUBLISHes on the log's key (in the same
// script, emitLua, so no round trip more), and one Pub/Sub connection per
// Store carries the wake-ups of all the conversations its streams watch. A
// stream that waits holds a channel, no connection; a stream whose client
// has gone leaves at once through its context.
//
// A publication carries what the write appended, with the id of the entry
// before it (eventNews). A reader that has read up to that id takes the
// new events from the publication and reads the log only when the
// publications do not tell: when it starts, after a bare wake-up (a
// deletion, a lost connection, a subscription) or when it is behind what
// its channel kept.

// wakes fans one Pub/Sub connection out to the readers waiting on event
// logs. Made on the first blocking read.
type wakes struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	ps      *redis.PubSub
	started bool
	subs    map[string]*wakeSub // by channel (the log's key)
	// pending counts, per channel, the SUBSCRIBEs sent that the server
	// has not confirmed yet, so a subscription made again soon after an
	// UNSUBSCRIBE is ready only at its own confirmation.
	pending map[string]int
}

// wakeSub is one channel's subscription and the readers waiting on it.
type wakeSub struct {
	readers map[*waker]struct{}
	need    int           // confirmations still to come before ready
	ready   chan struct{} // closed once the server confirmed the subscription
	// linger, while no reader waits, ends the subscription when it fires.
	linger *time.Timer
	// gen counts the wake-ups the channel has had: its publications, and
	// the connection's losses and subscriptions, around which one could
	// have been missed.
	gen uint64
	// end, when set (hasEnd), is where the log ended at generation endGen:
	// a read begun then found no event after it.
	end    string
	endGen uint64
	hasEnd bool
	// news is what the channel's publications told of the log's newest
	// entries, while newsGen is gen: the log holds exactly news.events
	// after news.prev.
	news    eventNews
	newsGen uint64
}

// eventNews is what a publication on an event log's channel tells: the
// events a write appended, and the id of the entry before them ("0": the
// log held nothing before them). It reads "prev\nid\njson\nid\njson…"
// (emitLua); an event's JSON holds no raw newline.
type eventNews struct {
	prev   string
	events []record.Event
}

// after is n without the events up to id: the news after id, which the
// log holds exactly as well, or none when id comes before their prev.
func (n eventNews) after(id string) eventNews {
	if c, ok := compareIDs(id, n.prev); id != n.prev && (!ok || c < 0) {
		return eventNews{}
	}
	i := 0
	for i < len(n.events) {
		if c, ok := compareIDs(n.events[i].ID, id); ok && c > 0 {
			break
		}
		i++
	}
	return eventNews{prev: id, events: n.events[i:]}
}

// maxNews and maxNewsBytes bound the events a channel keeps from its
// publications, for the readers a little behind its newest (which always
// stays).
const (
	maxNews      = 256
	maxNewsBytes = 256 << 10 // of the events' JSON
)

// parseNews reads a publication's payload; false for a bare wake-up or one
// it cannot read, after which readers read the log.
func parseNews(payload string) (eventNews, bool) {
	prev, rest, ok := strings.Cut(payload, "\n")
	if !ok || prev == "" {
		return eventNews{}, false
	}
	n := eventNews{prev: prev}
	for rest != "" {
		id, after, ok := strings.Cut(rest, "\n")
		if !ok {
			return eventNews{}, false
		}
		raw, next, _ := strings.Cut(after, "\n")
		e, ok := decodeEvent(id, raw)
		if !ok {
			return eventNews{}, false
		}
		n.events = append(n.events, e)
		rest = next
	}
	return n, len(n.events) > 0
}

// publish records a publication on s's channel, made generation gen:
// news continuing the kept ones extend them, others replace them.
func (s *wakeSub) publish(n eventNews, gen uint64) {
	if s.newsGen == gen-1 && len(s.news.events) > 0 && s.news.events[len(s.news.events)-1].ID == n.prev {
		n.events = append(s.news.events, n.events...)
		n.prev = s.news.prev
	}
	size := 0
	for _, e := range n.events {
		size += len(e.Raw)
	}
	drop := 0 // the oldest first, never the newest
	for drop < len(n.events)-1 && (len(n.events)-drop > maxNews || size > maxNewsBytes) {
		size -= len(n.events[drop].Raw)
		drop++
	}
	if drop > 0 {
		n.prev = n.events[drop-1].ID
		n.events = n.events[drop:]
	}
	s.news, s.newsGen = n, gen
	s.end, s.endGen, s.hasEnd = n.events[len(n.events)-1].ID, gen, true
}

// compareIDs compares stream ids a and b ("ms-seq", or "ms" for
// "ms-0"): -1, 0 or +1; ok is false when either is not an id.
func compareIDs(a, b string) (c int, ok bool) {
	am, as, ok1 := parseID(a)
	bm, bs, ok2 := parseID(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	if c = cmp.Compare(am, bm); c == 0 {
		c = cmp.Compare(as, bs)
	}
	return c, true
}

func parseID(id string) (ms, seq uint64, ok bool) {
	m, q, hasSeq := strings.Cut(id, "-")
	ms, err := strconv.ParseUint(m, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if hasSeq {
		if seq, err = strconv.ParseUint(q, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return ms, seq, true
}

// fromNews returns up to count events after id after from the
// publications of w's channel; ok is false when they do not tell (the
// reader reads the log).
func (h *wakes) fromNews(w *waker, after string, count int) (evs []record.Event, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := w.sub
	if s.newsGen != s.gen || s.news.prev == "" {
		return nil, false
	}
	// The log holds exactly the news after their prev, so after any id
	// from prev on it holds the news after that id.
	n := s.news.after(after)
	if n.prev == "" {
		return nil, false
	}
	evs = n.events
	if len(evs) > count {
		evs = evs[:count]
	}
	return slices.Clone(evs), true
}

// generation is w's channel's count of wake-ups.
func (h *wakes) generation(w *waker) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.sub.gen
}

// ended records that a read begun at generation gen found the log of w's
// channel ending at id.
func (h *wakes) ended(w *waker, id string, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.sub.end, w.sub.endGen, w.sub.hasEnd = id, gen, true
}

// endsAt reports whether the log of w's channel is known to end at after:
// a read found it so, and the channel has had no wake-up since.
func (h *wakes) endsAt(w *waker, after string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := w.sub
	return s.hasEnd && s.end == after && s.endGen == s.gen
}

// drop forgets what channel ch's publications told of its log, once
// events have left the log (deleted, or the whole log): the readers of
// this Store read it again at once, and those of other processes at the
// bare wake-up that follows the deletion.
func (h *wakes) drop(ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sub := h.subs[ch]; sub != nil {
		sub.forgetLog()
	}
}

// forget drops what w's channel knows of its log's end and newest events.
func (h *wakes) forget(w *waker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.sub.forgetLog()
}

// forgetLog drops what s knows of its log: where it ends, and its news.
func (s *wakeSub) forgetLog() { s.news, s.hasEnd = eventNews{}, false }

// waker is one reader's wake-up: a send means "read the log again".
type waker struct {
	c   chan struct{} // capacity 1
	sub *wakeSub
	ch  string
	// cursor is the id after which its reader will read next, once it
	// leaves: the last event it returned, or where it began.
	cursor string
}

func (w *waker) wake() {
	select {
	case w.c <- struct{}{}:
	default: // one wake-up pending is enough
	}
}

func newWakes(rdb redis.UniversalClient) *wakes {
	return &wakes{rdb: rdb, subs: map[string]*wakeSub{}, pending: map[string]int{}}
}

// subscribeTimeout bounds the wait for the server to confirm a subscription.
const subscribeTimeout = 5 * time.Second

// lingerFor is how long a channel stays subscribed after its last reader
// left. A stream reads its log in a loop, one Events call per batch of
// events: the next call finds the channel subscribed and confirmed, not a
// SUBSCRIBE and its confirmation on its path again. The reader itself —
// its wake-up channel, its goroutine — is released at once.
const lingerFor = 2 * time.Second

// watch registers a reader of channel ch and returns once the server has
// confirmed the subscription, so no publication after watch returns is
// missed.
func (h *wakes) watch(ctx context.Context, ch string) (*waker, error) {
	h.mu.Lock()
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx))
	}
	sub := h.subs[ch]
	fresh := sub == nil
	if fresh {
		h.pending[ch]++
		sub = &wakeSub{readers: map[*waker]struct{}{}, need: h.pending[ch], ready: make(chan struct{})}
		h.subs[ch] = sub
	}
	if sub.linger != nil {
		sub.linger.Stop() // a late fire finds a reader, and keeps the channel
		sub.linger = nil
	}
	w := &waker{c: make(chan struct{}, 1), sub: sub, ch: ch}
	sub.readers[w] = struct{}{}
	if !h.started {
		h.started = true
		go h.receive(h.ps)
	}
	if fresh {
		// Under h.mu, so a channel's SUBSCRIBE and UNSUBSCRIBE reach the
		// server in the order the readers came and went.
		if err := h.ps.Subscribe(ctx, ch); err != nil {
			h.leaveLocked(w)
			h.mu.Unlock()
			return nil, fmt.Errorf("subscribe to %s: %w", ch, err)
		}
	}
	h.mu.Unlock()

	t := time.NewTimer(subscribeTimeout)
	defer t.Stop()
	select {
	case <-sub.ready:
		return w, nil
	case <-ctx.Done():
		h.leave(w)
		return nil, ctx.Err()
	case <-t.C:
		h.leave(w)
		return nil, fmt.Errorf("subscribe to %s: not confirmed within %s", ch, subscribeTimeout)
	}
}

// leave unregisters w; the channel of its last reader is unsubscribed
// lingerFor later, unless a reader came back meanwhile.
func (h *wakes) leave(w *waker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leaveLocked(w)
}

func (h *wakes) leaveLocked(w *waker) {
	sub, ch := w.sub, w.ch
	delete(sub.readers, w)
	if len(sub.readers) > 0 || h.subs[ch] != sub || sub.linger != nil {
		return
	}
	select {
	case <-sub.ready:
	default:
		h.unsubscribeLocked(ch) // never confirmed: not kept
		return
	}
	// A lingering channel keeps only the news after where its last reader
	// left (w.cursor): what that stream, coming back, has not had yet.
	sub.news = sub.news.after(w.cursor)
	sub.linger = time.AfterFunc(lingerFor, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.subs[ch] == sub && len(sub.readers) == 0 {
			h.unsubscribeLocked(ch)
		}
	})
}

// unsubscribeLocked ends the subscription of ch.
func (h *wakes) unsubscribeLocked(ch string) {
	delete(h.subs, ch)
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	// Not waited for: a late confirmation finds no subscription and is
	// ignored; one that fails leaves a channel nobody reads, whose
	// wake-ups are dropped.
	_ = h.ps.Unsubscribe(ctx, ch)
}

// receive reads the Pub/Sub connection for the life of the process.
// A lost connection wakes every reader (each reads its log again) and marks
// every subscription ready: go-redis dials again and subscribes to them
// all at its next read.
func (h *wakes) receive(ps *redis.PubSub) {
	ctx := context.Background()
	for {
		msg, err := ps.Receive(ctx)
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		var news eventNews
		hasNews := false
		if m, ok := msg.(*redis.Message); ok {
			news, hasNews = parseNews(m.Payload) // read before taking h.mu
		}
		h.mu.Lock()
		if err != nil {
			clear(h.pending)
			for _, sub := range h.subs {
				sub.gen++
				sub.markReady()
				for w := range sub.readers {
					w.wake()
				}
			}
			h.mu.Unlock()
			time.Sleep(100 * time.Millisecond) // not a synchronisation: a pause before dialling again
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				break
			}
			if h.pending[m.Channel] > 0 {
				h.pending[m.Channel]--
			}
			if h.pending[m.Channel] == 0 {
				delete(h.pending, m.Channel)
			}
			if sub := h.subs[m.Channel]; sub != nil {
				sub.gen++
				sub.need--
				if sub.need <= 0 {
					sub.markReady()
				}
			}
		case *redis.Message:
			if sub := h.subs[m.Channel]; sub != nil {
				sub.gen++
				if hasNews {
					sub.publish(news, sub.gen)
				}
				for w := range sub.readers {
					w.wake()
				}
			}
		}
		h.mu.Unlock()
	}
}

func (s *wakeSub) markReady() {
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}
