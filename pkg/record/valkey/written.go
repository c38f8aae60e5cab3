package valkey

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/clientagent/clientagent/pkg/gopool"
	"github.com/clientagent/clientagent/pkg/record"
)

// A step reads the turn the step before it wrote: on the local stack,
// where every handler runs in one process, almost always the turn this
// Store wrote last. SaveTurn stores a version with the turn (the field
// tv:<tid>, written in the same script as the turn's own fields, which no
// other script writes) and keeps the bytes it wrote under that version.
// The next read of the turn takes them back: it names the version, the
// script sends the turn's body and messages only when the stored version
// differs (another process wrote the turn since), and while the read's
// round trip is in flight the kept bytes are decoded. What the step gets
// is what it would have decoded from the reply, byte for byte, without the
// bytes crossing the wire twice and with their decoding off the step's
// path.
//
// A read that finds the turn unchanged, or reads it whole, keeps it again
// as stored for the read after it (the turn it decodes is that reader's
// to change; the bytes stay as they were), so a step that writes nothing
// (an invoke records its outcome apart) does not cost the next one its
// turn's body. The newest writes are kept, a few per turn running. A Store keeps writes only with Options.ReadBack: a Lambda
// function's next step of a turn mostly follows another function's write,
// which its read would decode again. Every write stores its version, ""
// without ReadBack, so a kept version never outlives a later write.

// writtenKeep bounds the writes a Store keeps for its next reads.
const writtenKeep = 256

// written is what a Store keeps of its newest turn writes.
type written struct {
	prefix string        // this Store's version prefix, random
	seq    atomic.Uint64 // the versions this Store made, and its keeps' order

	mu    sync.Mutex
	turns map[string]*writtenTurn // by cid + "/" + tid
	order []keptAt                // the keeps, oldest first; some replaced or taken since

	ahead  aheads // the reads ahead of its writes (ahead.go)
	starts starts // the calls its writes started, with their reads (ahead.go)
}

// writtenTurn is one kept write: the version stored with it and the turn's
// body and messages as stored.
type writtenTurn struct {
	version    string
	seq        uint64
	body, msgs string
	// early is the turn decoded already, for the read that takes it
	// first: a write that read ahead started it while its round trip was
	// in flight (ahead.go), where the read it spares would have.
	early *decoding
}

// decoding is a turn being decoded on a goroutine of its own.
type decoding struct {
	done chan struct{}
	t    *record.Turn
	err  error
}

// decode starts decoding turn tid's body and messages.
func decode(tid, body, msgs string) *decoding {
	d := &decoding{done: make(chan struct{})}
	gopool.Go(func() {
		defer close(d.done)
		d.t, d.err = decodeTurnBody(tid, body, msgs)
	})
	return d
}

type keptAt struct {
	key string
	seq uint64
}

func newWritten() *written {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &written{prefix: hex.EncodeToString(b[:]) + "-", turns: map[string]*writtenTurn{}}
}

// version is a new version, unique to this Store ("" when it keeps
// nothing).
func (w *written) version() string {
	if w == nil {
		return ""
	}
	return w.prefix + strconv.FormatUint(w.seq.Add(1), 36)
}

// keep keeps turn tid of cid as stored under version, replacing what was
// kept of the turn when replace is set (a write), else only when nothing
// is (a read: a write kept since is newer), and forgets the oldest beyond
// writtenKeep. An empty version (a write of a Store that keeps nothing)
// is never kept.
func (w *written) keep(cid, tid, version, body, msgs string, replace bool) {
	w.keepDecoding(cid, tid, version, body, msgs, replace, nil)
}

// keepDecoding is keep, with the turn's decoding already started.
func (w *written) keepDecoding(cid, tid, version, body, msgs string, replace bool, early *decoding) {
	if w == nil || version == "" {
		return
	}
	key := cid + "/" + tid
	w.mu.Lock()
	defer w.mu.Unlock()
	if !replace && w.turns[key] != nil {
		return
	}
	seq := w.seq.Add(1)
	w.turns[key] = &writtenTurn{version: version, seq: seq, body: body, msgs: msgs, early: early}
	w.order = append(w.order, keptAt{key, seq})
	for len(w.turns) > writtenKeep {
		o := w.order[0]
		w.order = w.order[1:]
		if wt := w.turns[o.key]; wt != nil && wt.seq == o.seq {
			delete(w.turns, o.key)
		}
	}
	if len(w.order) > 4*writtenKeep { // mostly keeps replaced or taken since
		live := w.order[:0]
		for _, o := range w.order {
			if wt := w.turns[o.key]; wt != nil && wt.seq == o.seq {
				live = append(live, o)
			}
		}
		w.order = live
	}
}

// forget drops what is kept of turn tid of cid: after a write that may
// have been stored, or not.
func (w *written) forget(cid, tid string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.turns, cid+"/"+tid)
	w.mu.Unlock()
}

// kept is a read's take of a kept turn: its version, and the turn decoded
// while the read is in flight.
type kept struct {
	*writtenTurn
	*decoding
}

// decoded waits for the kept turn's decoding and returns it, the
// reader's to change.
func (k *kept) decoded() (*record.Turn, error) {
	<-k.done
	return k.t, k.err
}

// take removes what is kept of turn tid of cid and starts decoding it
// (nil when nothing is kept): the read that names its version settles it.
func (w *written) take(cid, tid string) *kept {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	wt := w.turns[cid+"/"+tid]
	delete(w.turns, cid+"/"+tid)
	w.mu.Unlock()
	if wt == nil {
		return nil
	}
	d := wt.early
	if d == nil {
		d = decode(tid, wt.body, wt.msgs)
	}
	return &kept{writtenTurn: wt, decoding: d}
}

// decodeEarly starts decoding what is kept of turn tid of cid, for the
// read that takes it next (a write that reads ahead for it is in flight),
// and returns its version ("" when nothing is kept).
func (w *written) decodeEarly(cid, tid string) string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wt := w.turns[cid+"/"+tid]
	if wt == nil {
		return ""
	}
	if wt.early == nil {
		wt.early = decode(tid, wt.body, wt.msgs)
	}
	return wt.version
}

// settle keeps, after a read of turn tid of cid, the turn as stored for
// the next read: what was taken (k) when the reply named it unchanged,
// else the reply's body and messages under the stored version.
func (w *written) settle(cid, tid string, k *kept, body, msgs, version string) {
	if body == unchangedTurn && k != nil {
		body, msgs, version = k.body, k.msgs, k.version
	}
	if body != "" && body != unchangedTurn {
		w.keep(cid, tid, version, body, msgs, false)
	}
}

// putBack keeps again what a read took (k) and did not use, unless a
// newer write of the turn is kept since.
func (w *written) putBack(cid, tid string, k *kept) {
	if k != nil {
		w.keep(cid, tid, k.version, k.body, k.msgs, false)
	}
}
