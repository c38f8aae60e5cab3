// Package valkey stores conversation records (package record) in Valkey or
// Redis with go-redis v9, laid out as docs/design.md §4 so that concurrent turns
// cannot lose each other's writes and every key of one conversation shares
// one cluster slot:
//
//	conv:{<cid>}                  hash: meta (JSON Meta), updated, title, status, layout, and per turn:
//	                              turn:<tid> (JSON Turn without its messages), msgs:<tid> (its
//	                              llm_messages), head:<tid> (start, status, call states), n:<tid>
//	                              (its size in the LLM view), arts:<tid> (the artifacts it made or
//	                              was given), answered:<tid>, llm_calls:<tid>, tokens:<tid>,
//	                              results:<tid> (marker: that turn has a results hash)
//	conv:{<cid>}:turns            sorted set: turn ids by start time
//	conv:{<cid>}:active           set: the turns still running or waiting
//	conv:{<cid>}:artifacts        hash: artifact id → JSON artifact.Artifact
//	conv:{<cid>}:artorder         sorted set: artifact ids by creation time
//	conv:{<cid>}:inputs           hash: tool → "<ms>|<JSON inputs>" of its newest succeeded call
//	conv:{<cid>}:results:<tid>    hash: call id → JSON CallOutcome, written once (HSETNX)
//	user:{<sub>}:convs            sorted set: the owner's conversation ids
//
// Every method is one round trip (Delete two). LoadStep reads only what a
// step needs — its turn, the active turns, the newest turns of the
// transcript window, the newest artifacts and the skill-inputs summary — in
// one read-only script, so a step's cost does not grow with the
// conversation's length; SaveTurn keeps the indexes and the summary on
// write. Reads never use MULTI/EXEC: a full server refuses every command of
// a transaction, while plain reads (and EVAL_RO) keep working.
//
// The owner index is written only by Create (score: creation time) and read
// by List, which orders by each conversation's `updated` field and prunes
// ids whose conversation is gone (expired or deleted).
package valkey

import (
	"cmp"
	"context"
	"encoding/json"
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

// lazyScript is the script of its source's parts, joined (and its SHA1
// taken) at its first use: the package's scripts made at init were half a
// millisecond of every function's cold start (docs/benchmarks.md).
func lazyScript(parts ...string) func() *redis.Script {
	return sync.OnceValue(func() *redis.Script { return redis.NewScript(strings.Join(parts, "")) })
}

// DefaultIdleTTL is how long a conversation's keys live after its last write.
const DefaultIdleTTL = 30 * 24 * time.Hour

// Options configures a Store.
type Options struct {
	// IdleTTL is how long keys live after the last SaveTurn / PutOutcome
	// (operational context, not an archive). Zero means DefaultIdleTTL.
	IdleTTL time.Duration
	// ReadBack keeps the Store's newest turn writes for its next reads of
	// those turns (written.go): for a process that runs a turn's steps one
	// after another, as the local stack does. A Lambda function's next
	// step of a turn mostly follows another function's write, so it keeps
	// nothing.
	ReadBack bool
}

// Store is record.Store on a Valkey/Redis client.
type Store struct {
	rdb redis.UniversalClient
	ttl time.Duration

	// wakes carries the event logs' wake-ups to the readers that wait
	// (events.go), made on first use: a waiting reader holds no
	// connection, so event streams never starve the steps and the API.
	wakesOnce sync.Once
	wakes     *wakes

	// written keeps this Store's newest turn writes for the reads that
	// follow them (written.go); nil without Options.ReadBack.
	written *written
}

var _ record.Store = (*Store)(nil)

// New returns a Store using client. The client's timeouts bound every call
// (see Open); callers also pass contexts with deadlines.
func New(client redis.UniversalClient, opts Options) *Store {
	if opts.IdleTTL <= 0 {
		opts.IdleTTL = DefaultIdleTTL
	}
	s := &Store{rdb: client, ttl: opts.IdleTTL}
	if opts.ReadBack {
		s.written = newWritten()
	}
	return s
}

// Hash fields of conv:{<cid>} besides the turns.
const (
	fieldMeta    = "meta"
	fieldAhead   = "ahead"   // the counter of reads ahead (ahead.go)
	fieldUpdated = "updated" // RFC 3339 time of the last SaveTurn, for List
	fieldTitle   = "title"   // first saved non-empty turn text, for List
	fieldStatus  = "status"  // status of the newest turn (by start), for List
	// fieldWindow names the turn where the transcript window starts
	// (record.Conversation.WindowFrom), kept so the window moves in steps.
	fieldWindow = "window"
	// answeredPrefix+<tid> holds the task token the API answered last.
	answeredPrefix = "answered:"
	turnPrefix     = "turn:"
	msgsPrefix     = "msgs:"
	// versionPrefix+<tid> is the version of the turn's last write
	// (SaveTurn), by which a read skips a turn its reader wrote (written.go).
	versionPrefix = "tv:"
	headPrefix    = "head:"
	sizePrefix    = "n:"
	artsPrefix    = "arts:"
	// fieldLayout marks a conversation stored in this layout (turns
	// indexed, messages apart); one without it is migrated on first step.
	fieldLayout = "layout"
	layout      = "2"
	// callsPrefix+<tid> and tokensPrefix+<tid> count the turn's provider
	// calls and tokens (AddSpend), apart from its field.
	callsPrefix  = "llm_calls:"
	tokensPrefix = "tokens:"
	cachedPrefix = "cached:"
	cancelPrefix = "cancel:" // the user cancelled the turn (MarkCancelled)
	// supersededPrefix+<tid> names the turn that replaced tid, written
	// with every save of the replacing turn, so a read of tid alone
	// knows it.
	supersededPrefix = "superseded:"
	costPrefix       = "cost:"
	resultsPrefix    = "results:" // marks a turn with a results hash
	// startPrefix+<call id> in a turn's results hash: StartCall started
	// the call (never decoded as an outcome).
	startPrefix = "start:"
)

func convKey(cid string) string      { return "conv:{" + cid + "}" }
func artifactsKey(cid string) string { return "conv:{" + cid + "}:artifacts" }
func turnsKey(cid string) string     { return "conv:{" + cid + "}:turns" }
func activeKey(cid string) string    { return "conv:{" + cid + "}:active" }
func artOrderKey(cid string) string  { return "conv:{" + cid + "}:artorder" }
func inputsKey(cid string) string    { return "conv:{" + cid + "}:inputs" }
func resultsKey(cid, tid string) string {
	return "conv:{" + cid + "}:results:" + tid
}
func userKey(owner string) string { return "user:{" + owner + "}:convs" }

// Create stores m (only if the conversation has no meta yet, so a retried
// create is harmless) and adds it to its owner's index. The two live in
// different cluster slots, so they go in one pipeline, not one transaction
// (a cluster refuses a cross-slot MULTI); a create that fails between them
// is retried by the caller and repeats nothing.
func (s *Store) Create(ctx context.Context, m record.Meta) error {
	if m.ID == "" || m.Owner == "" {
		return fmt.Errorf("create conversation: id and owner are required")
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("create conversation %s: %w", m.ID, err)
	}
	ck := convKey(m.ID)
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, ck, fieldMeta, b)
		p.HSetNX(ctx, ck, fieldUpdated, m.CreatedAt.Format(time.RFC3339Nano))
		p.HSetNX(ctx, ck, fieldLayout, layout)
		if m.Title != "" {
			p.HSetNX(ctx, ck, fieldTitle, m.Title)
		}
		p.Expire(ctx, ck, s.ttl)
		p.ZAdd(ctx, userKey(m.Owner), redis.Z{Score: float64(m.CreatedAt.UnixMilli()), Member: m.ID})
		p.Expire(ctx, userKey(m.Owner), s.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("create conversation %s: %w", m.ID, classify(err))
	}
	return nil
}

// AddSpend adds one provider call's spend to the turn's counters
// (HINCRBY) and appends its events to the event log, in one script. It
// does not check that the conversation exists: a step only spends after
// loading it, and counters left by a step racing a deletion sit in a hash
// without meta, which no read takes for a conversation, until they expire.
func (s *Store) AddSpend(ctx context.Context, cid, turnID string, sp record.Spend) error {
	ops := spendOps(nil, turnID, sp)
	args := append(make([]any, 0, 2+len(ops)+len(sp.Events)), int64(s.ttl/time.Second), len(ops)/3)
	args, err := appendEventArgs(append(args, ops...), sp.Events)
	if err == nil {
		err = classify(addSpendScript().Run(ctx, s.rdb, []string{convKey(cid), eventsKey(cid)}, args...).Err())
	}
	if err != nil {
		return fmt.Errorf("add spend of turn %s of %s: %w", turnID, cid, err)
	}
	return nil
}

// addSpendScript: KEYS conv, events; ARGV ttl, the number of field ops,
// the ops (spendOps), then the events' JSON. An active conversation
// carries no TTL (saveTurnScript), so only a TTL that is set is renewed.
var addSpendScript = lazyScript(emitLua, fieldOpsLua+`
local i = fieldOps(KEYS[1], 2)
if i <= #ARGV then emit(KEYS[2], {unpack(ARGV, i)}) end
redis.call('EXPIRE', KEYS[1], ARGV[1], 'XX')
return 1
`)

// MarkAnswered stores the answered token beside the turn's own field, so
// the API never writes a turn its execution owns. A script, not MULTI: a
// full server refuses it with OOM (record.ErrFull), where a transaction
// would answer only EXECABORT.
func (s *Store) MarkAnswered(ctx context.Context, cid, turnID, token string) error {
	err := markAnsweredScript().Run(ctx, s.rdb, []string{convKey(cid)}, answeredPrefix+turnID, token, int64(s.ttl/time.Second)).Err()
	if err != nil {
		return fmt.Errorf("mark turn %s of %s answered: %w", turnID, cid, classify(err))
	}
	return nil
}

var markAnsweredScript = lazyScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3], 'XX')
return 1
`)

// PutOutcome stores o under its call id unless an outcome is stored there
// already (HSETNX), so a retried invoke keeps the first result; Stored
// reports whether this call wrote it, and Cancelled whether the turn was
// marked cancelled by then. o's artifacts are not added to the catalog
// here: the turn's SaveTurn does that when it appends the result.
func (s *Store) PutOutcome(ctx context.Context, cid, turnID string, o record.CallOutcome) (record.Put, error) {
	put, _, err := s.putOutcome(ctx, cid, turnID, o, putOutcomeScript())
	return put, err
}

// putOutcome runs script, putOutcomeScript or putOutcomeAheadScript (then
// ahead, its arguments); it returns the read ahead's reply (nil without
// one).
func (s *Store) putOutcome(ctx context.Context, cid, turnID string, o record.CallOutcome, script *redis.Script, ahead ...any) (record.Put, []any, error) {
	keys, args, _, err := s.outcomeArgs(cid, turnID, o, len(ahead) > 0)
	if err != nil {
		return record.Put{}, nil, err
	}
	reply, err := script.Run(ctx, s.rdb, keys, append(args, ahead...)...).Result()
	return outcomeReply(cid, turnID, o, reply, err)
}

// outcomeArgs are putOutcomeScript's keys and ARGV for o (the keys its read
// ahead needs too when ahead is set), and o's JSON among them.
func (s *Store) outcomeArgs(cid, turnID string, o record.CallOutcome, ahead bool) (keys []string, args []any, b []byte, err error) {
	if o.CallID == "" || turnID == "" {
		return nil, nil, nil, fmt.Errorf("put outcome of %s: turn and call id are required", cid)
	}
	if b, err = json.Marshal(o); err != nil {
		return nil, nil, nil, fmt.Errorf("put outcome %s of %s/%s: %w", o.CallID, cid, turnID, err)
	}
	args = []any{int64(s.ttl / time.Second), o.CallID, b, resultsPrefix + turnID, len(o.Reserve)}
	for _, r := range o.Reserve {
		args = append(args, r.ID, r.Bytes, r.Limit)
	}
	if args, err = appendEventArgs(args, o.Events); err != nil {
		return nil, nil, nil, fmt.Errorf("put outcome %s of %s/%s: %w", o.CallID, cid, turnID, err)
	}
	keys = []string{convKey(cid), resultsKey(cid, turnID), artifactsKey(cid), eventsKey(cid), quotaKey(cid)}
	if ahead {
		keys = append(keys, turnsKey(cid), activeKey(cid), artOrderKey(cid), inputsKey(cid))
	}
	return keys, args, b, nil
}

// outcomeReply is what putOutcomeScript's reply (or err) says of o's put,
// and the read ahead's reply (nil without one).
func outcomeReply(cid, turnID string, o record.CallOutcome, reply any, err error) (record.Put, []any, error) {
	if err != nil {
		return record.Put{}, nil, fmt.Errorf("put outcome %s of %s/%s: %w", o.CallID, cid, turnID, classify(err))
	}
	var read []any
	if r, ok := reply.([]any); ok && len(r) == 3 {
		read, reply = r, r[0] // {the put's reply, the read ahead}
	}
	if over, ok := reply.([]any); ok && len(over) == 2 {
		// {index of the reservation that did not fit, bytes counted before it}
		i, _ := over[0].(int64)
		used, _ := over[1].(int64)
		if i < 1 || int(i) > len(o.Reserve) {
			return record.Put{}, nil, fmt.Errorf("put outcome %s of %s/%s: unexpected reply %v", o.CallID, cid, turnID, over)
		}
		return record.Put{OverQuota: &record.QuotaRefusal{Reservation: o.Reserve[i-1], Used: used}}, nil, nil
	}
	n, _ := reply.(int64)
	if n < 0 {
		return record.Put{}, nil, fmt.Errorf("put outcome %s of %s/%s: %w", o.CallID, cid, turnID, record.ErrNotFound)
	}
	return record.Put{Stored: n&1 == 1, Cancelled: n&2 == 2}, read, nil
}

// putOutcomeScript stores a call's outcome once (HSETNX) and, when it is
// the first, counts its files against the quota (KEYS[5], as reserveScript
// does: ARGV[5] reservations of id, bytes, limit) and appends its events
// (the ARGV after them) to the event log; it names the results hash in the
// conversation hash so Delete finds it even when the turn's own field was
// never saved, and does nothing for a conversation that no longer exists
// (-1). It adds 2 when the turn is marked cancelled. A reservation that
// does not fit stores nothing and counts nothing: the reply is {its
// 1-based index, the bytes counted before it}.
var putOutcomeScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(putOutcomeLua(false)) })

// putOutcomeAheadScript is putOutcomeScript, then the read ahead
// (aheadLua) whose arguments end ARGV; its KEYS go on with turns, active,
// artorder and inputs.
var putOutcomeAheadScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(putOutcomeLua(true)) })

func putOutcomeLua(ahead bool) string {
	return emitLua + aheadPrelude(ahead, 0) + `
if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return -1 end
local first = 6 + 3 * tonumber(ARGV[5])
if ARGV[5] ~= '0' and redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then
  local total = tonumber(redis.call('HGET', KEYS[5], 'total') or '0')
  local counts = {}
  for i = 6, first - 1, 3 do
    local old = tonumber(redis.call('HGET', KEYS[5], ARGV[i]) or '0')
    local n = tonumber(ARGV[i + 1])
    if total - old + n > tonumber(ARGV[i + 2]) then return {(i - 3) / 3, total} end
    total = total - old + n
    counts[#counts + 1] = ARGV[i]
    counts[#counts + 1] = n
  end
  redis.call('HSET', KEYS[5], 'total', total, unpack(counts))
  if redis.call('TTL', KEYS[1]) == -1 then redis.call('PERSIST', KEYS[5]) else redis.call('EXPIRE', KEYS[5], ARGV[1]) end
end
local set = redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[1], ARGV[4], 1)
-- Refresh only a TTL that is set: an active conversation's keys carry none
-- (saveTurnScript), and a running turn's results none until it ends.
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[1], 'XX') end
if set == 1 and last >= first then emit(KEYS[4], {unpack(ARGV, first, last)}) end
local tid = string.sub(ARGV[4], ` + strconv.Itoa(len(resultsPrefix)+1) + `)
if redis.call('HEXISTS', KEYS[1], 'cancel:' .. tid) == 1 then set = set + 2 end
return ahead({conv = KEYS[1], arts = KEYS[3], results = KEYS[2], turns = KEYS[6], active = KEYS[7], order = KEYS[8], inputs = KEYS[9]}, tid, set)
`
}

// DeleteOutcome removes a stored outcome so the call can run again (the
// answer to a specialist's input-required).
func (s *Store) DeleteOutcome(ctx context.Context, cid, turnID, callID string) error {
	if err := s.rdb.HDel(ctx, resultsKey(cid, turnID), callID).Err(); err != nil {
		return fmt.Errorf("delete outcome %s of %s/%s: %w", callID, cid, turnID, classify(err))
	}
	return nil
}

// List returns the owner's conversations, newest update first. It takes
// two round trips because the index lives in the owner's slot and each
// conversation in its own, which no script may span on a cluster: one
// reads the index (and refreshes its expiry), a second pipelined one
// reads meta, updated and title of each. Ids whose conversation is gone are
// pruned from the index (a third call, only when there are any).
func (s *Store) List(ctx context.Context, owner string) ([]record.Meta, error) {
	uk := userKey(owner)
	var ids *redis.StringSliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ids = p.ZRevRange(ctx, uk, 0, -1)
		p.Expire(ctx, uk, s.ttl)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list conversations of %s: %w", owner, classify(err))
	}
	if len(ids.Val()) == 0 {
		return []record.Meta{}, nil
	}
	cmds := make([]*redis.SliceCmd, len(ids.Val()))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids.Val() {
			cmds[i] = p.HMGet(ctx, convKey(id), fieldMeta, fieldUpdated, fieldTitle, fieldStatus)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list conversations of %s: %w", owner, classify(err))
	}
	out := make([]record.Meta, 0, len(cmds))
	var gone []any
	for i, c := range cmds {
		v := c.Val()
		metaJSON, _ := v[0].(string)
		if metaJSON == "" {
			gone = append(gone, ids.Val()[i])
			continue
		}
		var m record.Meta
		if err := unmarshal([]byte(metaJSON), &m); err != nil {
			return nil, fmt.Errorf("list conversations of %s: meta of %s: %w", owner, ids.Val()[i], err)
		}
		if m.Owner != owner { // an index entry must never leak another user's conversation
			gone = append(gone, ids.Val()[i])
			continue
		}
		m.UpdatedAt = m.CreatedAt
		if u, _ := v[1].(string); u != "" {
			if ts, err := time.Parse(time.RFC3339Nano, u); err == nil {
				m.UpdatedAt = ts
			}
		}
		if t, _ := v[2].(string); t != "" { // a rename, or the first message's text
			m.Title = record.Title(t)
		}
		if st, _ := v[3].(string); st != "" {
			m.Status = record.Status(st)
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b record.Meta) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if len(gone) > 0 {
		if err := s.rdb.ZRem(ctx, uk, gone...).Err(); err != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("list conversations of %s: prune: %w", owner, classify(err))
		}
	}
	return out, nil
}
