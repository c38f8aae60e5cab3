package valkey

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

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
// A kept write is taken by one read only (the turn it decodes is that
// reader's to change), and the newest writes are kept, a few per turn
// running. A Store keeps writes only with Options.ReadBack: a Lambda
// function's next step of a turn mostly follows another function's write,
// which its read would decode again. Every write stores its version, ""
// without ReadBack, so a kept version never outlives a later write.

// writtenKeep bounds the writes a Store keeps for its next reads.
const writtenKeep = 256

// written is what a Store keeps of its newest turn writes.
type written struct {
	prefix string        // this Store's version prefix, random
	seq    atomic.Uint64 // the versions this Store made

	mu    sync.Mutex
	turns map[string]*writtenTurn // by cid + "/" + tid
	order []keptAt                // the keeps, oldest first; some replaced or taken since
}

// writtenTurn is one kept write: the version stored with it and the bytes
// of the turn's body and messages.
type writtenTurn struct {
	version    string
	seq        uint64
	body, msgs []byte
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
func (w *written) version() (string, uint64) {
	if w == nil {
		return "", 0
	}
	n := w.seq.Add(1)
	return w.prefix + strconv.FormatUint(n, 36), n
}

// keep keeps the write of turn tid of cid made under version seq,
// replacing the turn's previous one, and forgets the oldest beyond
// writtenKeep.
func (w *written) keep(cid, tid, version string, seq uint64, body, msgs []byte) {
	if w == nil {
		return
	}
	key := cid + "/" + tid
	w.mu.Lock()
	defer w.mu.Unlock()
	w.turns[key] = &writtenTurn{version: version, seq: seq, body: body, msgs: msgs}
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

// forget drops the kept write of turn tid of cid: a write that may not
// have been stored as kept.
func (w *written) forget(cid, tid string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.turns, cid+"/"+tid)
	w.mu.Unlock()
}

// take removes and returns the kept write of turn tid of cid (nil when
// none), and decodes it while the caller's read is in flight: decoded
// waits for that and returns the turn as decodeTurnBody does.
func (w *written) take(cid, tid string) (version string, decoded func() (*record.Turn, error)) {
	if w == nil {
		return "", nil
	}
	w.mu.Lock()
	wt := w.turns[cid+"/"+tid]
	delete(w.turns, cid+"/"+tid)
	w.mu.Unlock()
	if wt == nil {
		return "", nil
	}
	var (
		t    *record.Turn
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		t, err = decodeTurnBody(tid, wt.body, wt.msgs)
	}()
	return wt.version, func() (*record.Turn, error) {
		<-done
		return t, err
	}
}
