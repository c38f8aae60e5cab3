// Package valkey stores conversation records (package record) in Valkey or
// Redis with go-redis v9, laid out as DESIGN §3 so that concurrent turns
// cannot lose each other's writes and every key of one conversation shares
// one cluster slot:
//
//	conv:{<cid>}                  hash: meta (JSON Meta), updated, title, turn:<tid> (JSON Turn),
//	                              results:<tid> (marker: that turn has a results hash)
//	conv:{<cid>}:artifacts        hash: artifact id → JSON artifact.Artifact
//	conv:{<cid>}:results:<tid>    hash: call id → JSON CallOutcome, written once (HSETNX)
//	user:{<sub>}:convs            sorted set: the owner's conversation ids
//
// Every method is one round trip. The merged view (turn order, title,
// update time) is computed on read by record.Assemble. The package must not
// interpret turns beyond that: the loop's rules live in package record and
// in the step handlers.
//
// The owner index is written only by Create (score: creation time) and read
// by List, which orders by each conversation's `updated` field and prunes
// ids whose conversation is gone (expired or deleted). SaveTurn therefore
// never needs the owner and touches only the conversation's own slot, so
// it is one atomic MULTI/EXEC even on a cluster.
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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
)

// DefaultIdleTTL is how long a conversation's keys live after its last write.
const DefaultIdleTTL = 30 * 24 * time.Hour

// Options configures a Store.
type Options struct {
	// IdleTTL is how long keys live after the last SaveTurn / PutOutcome
	// (operational context, not an archive). Zero means DefaultIdleTTL.
	IdleTTL time.Duration
}

// Store is record.Store on a Valkey/Redis client.
type Store struct {
	rdb redis.UniversalClient
	ttl time.Duration
}

var _ record.Store = (*Store)(nil)

// New returns a Store using client. The client's timeouts bound every call
// (see Open); callers also pass contexts with deadlines.
func New(client redis.UniversalClient, opts Options) *Store {
	if opts.IdleTTL <= 0 {
		opts.IdleTTL = DefaultIdleTTL
	}
	return &Store{rdb: client, ttl: opts.IdleTTL}
}

// Hash fields of conv:{<cid>} besides the turns.
const (
	fieldMeta    = "meta"
	fieldUpdated = "updated" // RFC 3339 time of the last SaveTurn, for List
	fieldTitle   = "title"   // first saved non-empty turn text, for List
	fieldStatus  = "status"  // status of the newest turn (by start), for List
	// answeredPrefix+<tid> holds the task token the API answered last.
	answeredPrefix = "answered:"
	turnPrefix     = "turn:"
	// callsPrefix+<tid> and tokensPrefix+<tid> count the turn's provider
	// calls and tokens (AddSpend), apart from its field.
	callsPrefix   = "llm_calls:"
	tokensPrefix  = "tokens:"
	resultsPrefix = "results:" // marks a turn with a results hash
)

func convKey(cid string) string      { return "conv:{" + cid + "}" }
func artifactsKey(cid string) string { return "conv:{" + cid + "}:artifacts" }
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
		p.Expire(ctx, ck, s.ttl)
		p.ZAdd(ctx, userKey(m.Owner), redis.Z{Score: float64(m.CreatedAt.UnixMilli()), Member: m.ID})
		p.Expire(ctx, userKey(m.Owner), s.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("create conversation %s: %w", m.ID, err)
	}
	return nil
}

// Load reads the conversation and, when turnID is set, that turn's stored
// outcomes, in one MULTI/EXEC (a consistent snapshot). It returns
// record.ErrNotFound (wrapped) when the conversation has no meta.
func (s *Store) Load(ctx context.Context, cid, turnID string) (*record.Conversation, map[string]record.CallOutcome, error) {
	var conv, arts, res *redis.MapStringStringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		conv = p.HGetAll(ctx, convKey(cid))
		arts = p.HGetAll(ctx, artifactsKey(cid))
		if turnID != "" {
			res = p.HGetAll(ctx, resultsKey(cid, turnID))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, err)
	}
	fields := conv.Val()
	metaJSON, ok := fields[fieldMeta]
	if !ok {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, record.ErrNotFound)
	}
	var m record.Meta
	if err := json.Unmarshal([]byte(metaJSON), &m); err != nil {
		return nil, nil, fmt.Errorf("load conversation %s: meta: %w", cid, err)
	}
	if m.Title == "" {
		m.Title = record.Title(fields[fieldTitle])
	}
	var turns []*record.Turn
	for f, v := range fields {
		if !strings.HasPrefix(f, turnPrefix) {
			continue
		}
		t := new(record.Turn)
		if err := json.Unmarshal([]byte(v), t); err != nil {
			return nil, nil, fmt.Errorf("load conversation %s: %s: %w", cid, f, err)
		}
		t.AnsweredToken = fields[answeredPrefix+t.ID]
		if n, err := strconv.Atoi(fields[callsPrefix+t.ID]); err == nil {
			t.LLMCalls = n
		}
		if n, err := strconv.Atoi(fields[tokensPrefix+t.ID]); err == nil {
			t.Tokens = n
		}
		turns = append(turns, t)
	}
	var catalog []artifact.Artifact
	for id, v := range arts.Val() {
		var a artifact.Artifact
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			return nil, nil, fmt.Errorf("load conversation %s: artifact %s: %w", cid, id, err)
		}
		catalog = append(catalog, a)
	}
	var outcomes map[string]record.CallOutcome
	if res != nil {
		outcomes = make(map[string]record.CallOutcome, len(res.Val()))
		for id, v := range res.Val() {
			var o record.CallOutcome
			if err := json.Unmarshal([]byte(v), &o); err != nil {
				return nil, nil, fmt.Errorf("load conversation %s: outcome %s: %w", cid, id, err)
			}
			outcomes[id] = o
		}
	}
	return record.Assemble(m, turns, catalog), outcomes, nil
}

// SaveTurn writes t's own field (never another turn's), adds artifacts to
// the catalog, records the update time and the first title, and refreshes
// the idle expiry of every key of the conversation, in one MULTI/EXEC.
// It does not check that the conversation exists: a turn only runs after
// its conversation was loaded.
func (s *Store) SaveTurn(ctx context.Context, cid string, t *record.Turn, arts ...artifact.Artifact) error {
	if t == nil || t.ID == "" {
		return fmt.Errorf("save turn of %s: turn id is required", cid)
	}
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("save turn %s of %s: %w", t.ID, cid, err)
	}
	updated := t.UpdatedAt
	if updated.IsZero() {
		updated = time.Now().UTC()
	}
	args := []any{int64(s.ttl / time.Second), turnPrefix + t.ID, b, updated.Format(time.RFC3339Nano), string(t.Status), t.Text, t.StartedAt.UnixMilli()}
	for _, a := range arts {
		ab, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("save turn %s of %s: artifact %s: %w", t.ID, cid, a.ID, err)
		}
		args = append(args, a.ID, ab)
	}
	n, err := saveTurnScript.Run(ctx, s.rdb, []string{convKey(cid), artifactsKey(cid), resultsKey(cid, t.ID)}, args...).Int()
	if err != nil {
		return fmt.Errorf("save turn %s of %s: %w", t.ID, cid, err)
	}
	if n == 0 {
		return fmt.Errorf("save turn %s of %s: %w", t.ID, cid, record.ErrNotFound)
	}
	return nil
}

// saveTurnScript writes one turn's field (and the artifacts it produced)
// only while the conversation exists: a step still running when its
// conversation is deleted must not bring the deleted record back. One
// round trip, one slot (every key has the {cid} tag).
var saveTurnScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3], 'updated', ARGV[4])
local newest = tonumber(redis.call('HGET', KEYS[1], 'status_started') or '0')
if tonumber(ARGV[7]) >= newest then redis.call('HSET', KEYS[1], 'status', ARGV[5], 'status_started', ARGV[7]) end
if ARGV[6] ~= '' then redis.call('HSETNX', KEYS[1], 'title', ARGV[6]) end
for i = 8, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i+1]) end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[1]) end
return 1
`)

// AddSpend adds one provider call's spend to the turn's counters with
// HINCRBY, only while the conversation exists (one script, one round trip).
func (s *Store) AddSpend(ctx context.Context, cid, turnID string, calls, tokens int) error {
	n, err := addSpendScript.Run(ctx, s.rdb, []string{convKey(cid)},
		int64(s.ttl/time.Second), callsPrefix+turnID, calls, tokensPrefix+turnID, tokens).Int()
	if err != nil {
		return fmt.Errorf("add spend of turn %s of %s: %w", turnID, cid, err)
	}
	if n == 0 {
		return fmt.Errorf("add spend of turn %s of %s: %w", turnID, cid, record.ErrNotFound)
	}
	return nil
}

var addSpendScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[2], ARGV[3])
redis.call('HINCRBY', KEYS[1], ARGV[4], ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
`)

// PutArtifacts adds artifacts to the conversation's catalog in one
// transaction (uploads, which belong to no turn yet).
func (s *Store) PutArtifacts(ctx context.Context, cid string, arts ...artifact.Artifact) error {
	if len(arts) == 0 {
		return nil
	}
	vals := make([]any, 0, 2*len(arts))
	for _, a := range arts {
		ab, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("put artifact %s of %s: %w", a.ID, cid, err)
		}
		vals = append(vals, a.ID, ab)
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, artifactsKey(cid), vals...)
		s.expire(ctx, p, cid, "")
		return nil
	})
	if err != nil {
		return fmt.Errorf("put artifacts of %s: %w", cid, err)
	}
	return nil
}

// MarkAnswered stores the answered token beside the turn's own field, so
// the API never writes a turn its execution owns.
func (s *Store) MarkAnswered(ctx context.Context, cid, turnID, token string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, convKey(cid), answeredPrefix+turnID, token)
		p.Expire(ctx, convKey(cid), s.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark turn %s of %s answered: %w", turnID, cid, err)
	}
	return nil
}

// expire refreshes the idle expiry of the conversation's keys a turn
// touches. EXPIRE on a key that does not exist yet is a no-op.
func (s *Store) expire(ctx context.Context, p redis.Pipeliner, cid, tid string) {
	p.Expire(ctx, convKey(cid), s.ttl)
	p.Expire(ctx, artifactsKey(cid), s.ttl)
	p.Expire(ctx, resultsKey(cid, tid), s.ttl)
}

// PutOutcome stores o under its call id unless an outcome is stored there
// already (HSETNX), so a retried invoke keeps the first result; stored
// reports whether this call wrote it. o's artifacts are not added to the
// catalog here: the turn's SaveTurn does that when it appends the result.
func (s *Store) PutOutcome(ctx context.Context, cid, turnID string, o record.CallOutcome) (bool, error) {
	if o.CallID == "" || turnID == "" {
		return false, fmt.Errorf("put outcome of %s: turn and call id are required", cid)
	}
	b, err := json.Marshal(o)
	if err != nil {
		return false, fmt.Errorf("put outcome %s of %s/%s: %w", o.CallID, cid, turnID, err)
	}
	n, err := putOutcomeScript.Run(ctx, s.rdb, []string{convKey(cid), resultsKey(cid, turnID), artifactsKey(cid)},
		int64(s.ttl/time.Second), o.CallID, b, resultsPrefix+turnID).Int()
	if err != nil {
		return false, fmt.Errorf("put outcome %s of %s/%s: %w", o.CallID, cid, turnID, err)
	}
	if n < 0 {
		return false, fmt.Errorf("put outcome %s of %s/%s: %w", o.CallID, cid, turnID, record.ErrNotFound)
	}
	return n == 1, nil
}

// putOutcomeScript stores a call's outcome once (HSETNX), names the
// results hash in the conversation hash so Delete finds it even when the
// turn's own field was never saved, and does nothing for a conversation
// that no longer exists (-1).
var putOutcomeScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return -1 end
local set = redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[1], ARGV[4], 1)
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[1]) end
return set
`)

// DeleteOutcome removes a stored outcome so the call can run again (the
// answer to a specialist's input-required).
func (s *Store) DeleteOutcome(ctx context.Context, cid, turnID, callID string) error {
	if err := s.rdb.HDel(ctx, resultsKey(cid, turnID), callID).Err(); err != nil {
		return fmt.Errorf("delete outcome %s of %s/%s: %w", callID, cid, turnID, err)
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
		return nil, fmt.Errorf("list conversations of %s: %w", owner, err)
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
		return nil, fmt.Errorf("list conversations of %s: %w", owner, err)
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
		if err := json.Unmarshal([]byte(metaJSON), &m); err != nil {
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
		if m.Title == "" {
			t, _ := v[2].(string)
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
			return nil, fmt.Errorf("list conversations of %s: prune: %w", owner, err)
		}
	}
	return out, nil
}

// deleteScript removes every key of one conversation: the hash, the
// catalog and the results hash of every turn named in the hash (by its
// turn:<tid> field or the results:<tid> marker PutOutcome writes). The keys
// all share the {cid} hash tag, so the script stays in one slot.
var deleteScript = redis.NewScript(`
local fields = redis.call('HKEYS', KEYS[1])
local n = 0
for _, f in ipairs(fields) do
  if string.sub(f, 1, 5) == 'turn:' then
    n = n + redis.call('DEL', KEYS[1] .. ':results:' .. string.sub(f, 6))
  elseif string.sub(f, 1, 8) == 'results:' then
    n = n + redis.call('DEL', KEYS[1] .. ':' .. f)
  end
end
return n + redis.call('DEL', KEYS[1], KEYS[2])
`)

// Delete removes every key of the conversation in one script call (EVAL,
// not EVALSHA, so it is one round trip even on a fresh server). The
// owner's index entry is pruned by the next List.
func (s *Store) Delete(ctx context.Context, cid string) error {
	if err := deleteScript.Eval(ctx, s.rdb, []string{convKey(cid), artifactsKey(cid)}).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("delete conversation %s: %w", cid, err)
	}
	return nil
}
