package valkey

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
)

// A step reads what it needs in one round trip, and writes once. On the
// local stack the step after it runs in the same process, and its read
// would only ask the store for what the write just left there. So a
// write can read ahead (record.ReadAhead): the same script that writes
// then runs the next step's read (readStep), numbers it with the
// conversation's ahead counter, and the Store keeps the reply under that
// token. The next step's input names the token (record.Query.After), and
// its LoadStep takes the reply instead of a round trip: the record as it
// was the moment the write landed. The turn's own body comes back as
// unchanged (it is the write's own, kept by written.go), so a reply is
// small.
//
// Several writes may precede one step (the calls of a batch, each storing
// its outcome): the newest of them, by the counter the scripts share, was
// read after all the others, so that one answers. A step whose newest
// token is another Store's reads, as does one whose query differs from
// what was read ahead, or whose turn this Store no longer keeps at the
// version the read assumed.

// aheadArgs is how many arguments the read ahead adds at the end of a
// write's ARGV: window, catalog size, outcomes, the turn's version.
const aheadArgs = 4

// aheadPrelude defines, for a write script, last (the write's own last
// ARGV) and ahead(K, tid, r), which returns the write's reply r; with the
// read ahead, {r, token number, readStep's reply} (r when the
// conversation is gone or not yet migrated). The read's arguments come
// after the write's, and tail more after them (a guarded write's guard).
func aheadPrelude(on bool, tail int) string {
	if !on {
		return `
local last = #ARGV - ` + strconv.Itoa(tail) + `
local function ahead(K, tid, r) return r end
`
	}
	return readStepLua + `
local last = #ARGV - ` + strconv.Itoa(aheadArgs+tail) + `
local function ahead(K, tid, r)
  local reply = readStep(K, tid, ARGV[last + 1], ARGV[last + 2], ARGV[last + 3], ARGV[last + 4])
  if type(reply) ~= 'table' or type(reply[1]) ~= 'table' then return r end
  return {r, redis.call('HINCRBY', K.conv, '` + fieldAhead + `', 1), reply}
end
`
}

// stepQuery is a Query as a step read's script takes it (and as a read
// ahead must match it).
type stepQuery struct {
	window, artifacts int
	outcomes          bool
}

func queryOf(q record.Query) stepQuery {
	size := q.Artifacts
	switch {
	case size == record.NoCatalog:
		size = 0 // readStepLua reads no catalog
	case size <= 0:
		size = record.DefaultCatalogSize
	}
	return stepQuery{window: q.Window, artifacts: size, outcomes: q.Outcomes && q.TurnID != ""}
}

// args are a step read's arguments after its turn: window, catalog size,
// outcomes and the version of the turn the reader keeps (runStep, and a
// write's read ahead).
func (q stepQuery) args(version string) []any {
	outcomes := "0"
	if q.outcomes {
		outcomes = "1"
	}
	return []any{q.window, q.artifacts, outcomes, version}
}

// readAhead is one kept read ahead of turn tid.
type readAhead struct {
	n       int64 // the conversation's ahead counter at the read
	query   stepQuery
	version string // the turn's version the read named ("": none, its body is in raw)
	raw     []any
	at      time.Time // when it was kept
}

// aheads keeps a Store's reads ahead, the newest per turn.
type aheads struct {
	mu    sync.Mutex
	turns map[string]*readAhead // by cid + "/" + tid
}

// A Store keeps at most aheadKeep reads ahead, and none longer than
// aheadFor once it keeps more than a few: the step that takes one runs
// milliseconds after its write, and the steps that were to take the
// others never ran (a cancel, a failed start, a lost child). A read ahead
// holds the next LLM step's window, so the bound is on memory too.
const (
	aheadKeep = writtenKeep
	aheadFor  = 30 * time.Second
)

// putAhead keeps a, unless a newer read of the turn is kept.
func (w *written) putAhead(cid, tid string, a *readAhead) {
	w.ahead.mu.Lock()
	defer w.ahead.mu.Unlock()
	key := cid + "/" + tid
	if old := w.ahead.turns[key]; old != nil && old.n > a.n {
		return
	}
	if w.ahead.turns == nil {
		w.ahead.turns = map[string]*readAhead{}
	}
	keepBounded(w.ahead.turns, key, a)
}

// keepBounded puts a in m under key, first dropping what was kept longer
// than aheadFor once m holds more than a few, and anything, past
// aheadKeep.
func keepBounded(m map[string]*readAhead, key string, a *readAhead) {
	if len(m) >= aheadKeep/4 {
		for k, old := range m {
			if a.at.Sub(old.at) > aheadFor {
				delete(m, k)
			}
		}
	}
	for k := range m {
		if len(m) < aheadKeep {
			break
		}
		delete(m, k)
	}
	m[key] = a
}

// takeAhead removes and returns the read ahead of q's turn that answers
// q: the one the newest of q.After names, when it is this Store's and was
// read with q's query.
func (w *written) takeAhead(cid string, q record.Query) *readAhead {
	if w == nil || len(q.After) == 0 || q.TurnID == "" {
		return nil
	}
	newest, ours := int64(-1), false
	for _, tok := range q.After {
		i := strings.LastIndexByte(tok, '-') // written.prefix ends with it
		n, err := strconv.ParseInt(tok[i+1:], 10, 64)
		if i < 0 || err != nil || n <= newest {
			continue
		}
		newest, ours = n, tok[:i+1] == w.prefix
	}
	if !ours {
		return nil
	}
	w.ahead.mu.Lock()
	defer w.ahead.mu.Unlock()
	key := cid + "/" + q.TurnID
	a := w.ahead.turns[key]
	if a == nil || a.n != newest {
		return nil
	}
	delete(w.ahead.turns, key)
	if a.query != queryOf(q) {
		return nil
	}
	return a
}

// token names read ahead n of this Store.
func (w *written) token(n int64) string { return w.prefix + strconv.FormatInt(n, 10) }

// aheadTaken is LoadStep from a kept read ahead of q, when there is one
// that answers q; ok false means the step reads.
func (s *Store) aheadTaken(cid string, q record.Query) (*record.Conversation, map[string]record.CallOutcome, bool, error) {
	return s.takenRead(cid, q.TurnID, s.written.takeAhead(cid, q))
}

// takenRead is a kept read of turn tid decoded (a nil a, or a turn's body
// no longer kept as the read names it: ok false, the step reads).
func (s *Store) takenRead(cid, tid string, a *readAhead) (*record.Conversation, map[string]record.CallOutcome, bool, error) {
	if a == nil {
		return nil, nil, false, nil
	}
	var own *kept
	if a.version != "" {
		// The reply holds the turn as unchanged: the kept write stands in.
		if own = s.written.take(cid, tid); own == nil || own.version != a.version {
			s.written.putBack(cid, tid, own)
			return nil, nil, false, nil
		}
	}
	conv, outcomes, err := s.decodeStep(cid, tid, a.raw, own)
	return conv, outcomes, true, err
}

// starts keeps, per call a write started (SaveTurnStarting), that
// write's read ahead, for the call's LoadStart.
type starts struct {
	mu    sync.Mutex
	calls map[string]*readAhead // by cid + "/" + tid + "/" + call id
}

// putStart keeps a for call callID of turn tid, dropping what no step
// took within aheadFor once it keeps more than a few.
func (w *written) putStart(cid, tid, callID string, a *readAhead) {
	w.starts.mu.Lock()
	defer w.starts.mu.Unlock()
	if w.starts.calls == nil {
		w.starts.calls = map[string]*readAhead{}
	}
	keepBounded(w.starts.calls, cid+"/"+tid+"/"+callID, a)
}

// takeStart removes and returns the read of the write that started call
// callID of q's turn, when it answers q.
func (w *written) takeStart(cid string, q record.Query, callID string) *readAhead {
	if w == nil || q.TurnID == "" {
		return nil
	}
	w.starts.mu.Lock()
	defer w.starts.mu.Unlock()
	key := cid + "/" + q.TurnID + "/" + callID
	a := w.starts.calls[key]
	if a == nil {
		return nil
	}
	delete(w.starts.calls, key)
	if a.query != queryOf(q) {
		return nil
	}
	return a
}

// startTaken is LoadStart of a call a write of this Store started, from
// that write's read; ok false means the step reads (and starts) as any.
func (s *Store) startTaken(cid string, q record.Query, callID string) (*record.Conversation, map[string]record.CallOutcome, bool, error) {
	return s.takenRead(cid, q.TurnID, s.written.takeStart(cid, q, callID))
}

// keptAhead keeps the read ahead of a write's reply (readOf) and returns
// its token ("" when the reply holds none).
func (s *Store) keptAhead(cid, tid string, reply []any, q stepQuery, version string) string {
	a := readOf(reply, q, version)
	if a == nil {
		return ""
	}
	s.written.putAhead(cid, tid, a)
	return s.written.token(a.n)
}

// readOf is the read ahead of a write's reply (reply[1] the token's
// number, reply[2] readStep's reply), nil when the reply holds none.
func readOf(reply []any, q stepQuery, version string) *readAhead {
	if len(reply) != 3 {
		return nil
	}
	n, ok := reply[1].(int64)
	raw, _ := reply[2].([]any)
	if !ok || len(raw) != 9 {
		return nil
	}
	if own := strs(raw[1]); len(own) == 0 || own[0] != unchangedTurn {
		version = "" // the reply holds the turn's body itself
	}
	return &readAhead{n: n, query: q, version: version, raw: raw, at: time.Now()}
}

// SaveTurnStarting is SaveTurnAhead, and the start of call callID after
// the write in the same script (record.StartingSave): the read ahead is
// kept for the step that follows and, a second time, for the call's
// LoadStart. A Store without Options.ReadBack keeps nothing: it only
// saves, and starts nothing (another process's LoadStart could not take
// the read, and would start the call itself).
func (s *Store) SaveTurnStarting(ctx context.Context, cid string, t *record.Turn, next record.Query, start record.Start, arts ...artifact.Artifact) (string, bool, error) {
	if s.written == nil || next.TurnID != t.ID || start.CallID == "" {
		return "", false, s.SaveTurn(ctx, cid, t, arts...)
	}
	version := s.written.version()
	q := queryOf(next)
	told := *t // the start's events go after the turn's, in the same script
	told.Events = append(slices.Clone(t.Events), start.Events...)
	args := append(q.args(version), start.CallID, time.Now().UTC().Format(time.RFC3339Nano))
	reply, err := s.saveTurn(ctx, cid, &told, arts, version, saveTurnStartingScript(), true, args...)
	if err != nil {
		return "", false, err
	}
	a := readOf(reply, q, version)
	if a == nil {
		return "", true, nil
	}
	s.written.putAhead(cid, t.ID, a)
	s.written.putStart(cid, t.ID, start.CallID, a)
	return s.written.token(a.n), true, nil
}

var _ record.StartingSave = (*Store)(nil)

// SaveTurnAhead is SaveTurn, and next read ahead in the same script
// (record.ReadAhead). A Store without Options.ReadBack keeps nothing and
// only saves.
func (s *Store) SaveTurnAhead(ctx context.Context, cid string, t *record.Turn, next record.Query, arts ...artifact.Artifact) (string, error) {
	if s.written == nil || next.TurnID != t.ID {
		return "", s.SaveTurn(ctx, cid, t, arts...)
	}
	version := s.written.version()
	q := queryOf(next)
	reply, err := s.saveTurn(ctx, cid, t, arts, version, saveTurnAheadScript(), true, q.args(version)...)
	if err != nil {
		return "", err
	}
	return s.keptAhead(cid, t.ID, reply, q, version), nil
}

// SaveFirstTurn is SaveTurnAhead of a conversation's new turn whose
// request read nothing (record.FirstWrite): the script checks what the
// request would have read, and writes only when the conversation is
// owner's and has no active turn (record.ErrReadFirst otherwise). A Store
// without Options.ReadBack only saves.
func (s *Store) SaveFirstTurn(ctx context.Context, cid, owner string, t *record.Turn, next record.Query) (string, error) {
	if s.written == nil || next.TurnID != t.ID {
		_, err := s.saveTurn(ctx, cid, t, nil, s.written.version(), saveTurnFirstScript(), false, owner)
		return "", err
	}
	version := s.written.version()
	q := queryOf(next)
	reply, err := s.saveTurn(ctx, cid, t, nil, version, saveTurnFirstAheadScript(), true, append(q.args(version), owner)...)
	if err != nil {
		return "", err
	}
	return s.keptAhead(cid, t.ID, reply, q, version), nil
}

var _ record.FirstWrite = (*Store)(nil)

// PutOutcomeAhead is PutOutcome, and next read ahead in the same script
// (record.ReadAhead). A Store without Options.ReadBack keeps nothing and
// only puts.
func (s *Store) PutOutcomeAhead(ctx context.Context, cid, turnID string, o record.CallOutcome, next record.Query) (record.Put, string, error) {
	if s.written == nil || next.TurnID != turnID {
		put, err := s.PutOutcome(ctx, cid, turnID, o)
		return put, "", err
	}
	// The read names the turn as this Store keeps it, if it does (the
	// invoke's own read kept it), so the reply leaves its body out; it is
	// decoded while the write is in flight.
	version := s.written.decodeEarly(cid, turnID)
	q := queryOf(next)
	put, reply, err := s.putOutcome(ctx, cid, turnID, o, putOutcomeAheadScript(), q.args(version)...)
	if err != nil || reply == nil {
		return put, "", err
	}
	return put, s.keptAhead(cid, turnID, reply, q, version), nil
}

var _ record.ReadAhead = (*Store)(nil)

// PutOutcomeAppending stores o as PutOutcome does and, in the same round
// trip, t as SaveTurnAhead does (next read ahead when the Store keeps
// reads): t is the turn with o's result appended, the write its batch's
// AppendResults would make when o is the batch's only call
// (record.AppendingPut). The turn is written only when the turn's results
// hold o as this put sent it: a put refused (over the quota), a turn
// cancelled meanwhile or another outcome stored first leave the turn as
// it was, and appended false. Both scripts go in one pipeline, the put
// first.
func (s *Store) PutOutcomeAppending(ctx context.Context, cid string, o record.CallOutcome, t *record.Turn, next record.Query, arts ...artifact.Artifact) (put record.Put, appended bool, token string, err error) {
	if t == nil || t.ID == "" {
		return record.Put{}, false, "", fmt.Errorf("put outcome of %s: turn id is required", cid)
	}
	pkeys, pargs, ob, err := s.outcomeArgs(cid, t.ID, o, false)
	if err != nil {
		return record.Put{}, false, "", err
	}
	version := s.written.version()
	sargs, body, msgs, err := s.turnArgs(t, arts, version)
	if err != nil {
		return record.Put{}, false, "", fmt.Errorf("save turn %s of %s: %w", t.ID, cid, err)
	}
	save, ahead := saveTurnGuardedScript(), s.written != nil && next.TurnID == t.ID
	q := queryOf(next)
	var early *decoding
	if ahead {
		save = saveTurnAppendingScript()
		sargs = append(sargs, q.args(version)...)
		early = decode(t.ID, string(body), string(msgs))
	}
	sargs = append(sargs, o.CallID, ob)
	pr, perr, sr, serr := s.runInOrder(ctx, putOutcomeScript(), pkeys, pargs, save, s.turnKeys(cid, t.ID), sargs)
	if put, _, err = outcomeReply(cid, t.ID, o, pr, perr); err != nil {
		s.written.forget(cid, t.ID)
		return record.Put{}, false, "", err
	}
	n, read := turnReply(sr)
	if serr != nil || n != 1 {
		if serr != nil {
			s.written.forget(cid, t.ID) // the write may have been stored, or not
		}
		return put, false, "", nil
	}
	s.written.keepDecoding(cid, t.ID, version, string(body), string(msgs), true, early)
	if ahead {
		token = s.keptAhead(cid, t.ID, read, q, version)
	}
	return put, true, token, nil
}

// runInOrder runs script a, then script b, in one round trip, and gives
// each its reply or error. A script the server does not know (NOSCRIPT:
// a new or restarted server, whose script cache is empty) is loaded and
// run again: both again when a was not known (b ran after a that did not
// run), else b alone.
func (s *Store) runInOrder(ctx context.Context, a *redis.Script, akeys []string, aargs []any, b *redis.Script, bkeys []string, bargs []any) (ra any, ea error, rb any, eb error) {
	both := func() {
		var ca, cb *redis.Cmd
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			ca = a.EvalSha(ctx, p, akeys, aargs...)
			cb = b.EvalSha(ctx, p, bkeys, bargs...)
			return nil
		})
		ra, ea = ca.Result()
		rb, eb = cb.Result()
	}
	both()
	switch {
	case redis.HasErrorPrefix(ea, "NOSCRIPT"):
		_ = b.Load(ctx, s.rdb).Err() // a's load below says whether the store answers
		if err := a.Load(ctx, s.rdb).Err(); err != nil {
			return nil, err, nil, err
		}
		both()
	case redis.HasErrorPrefix(eb, "NOSCRIPT"):
		rb, eb = b.Run(ctx, s.rdb, bkeys, bargs...).Result()
	}
	return ra, ea, rb, eb
}

var _ record.AppendingPut = (*Store)(nil)
