package valkey

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
)

// head is what a step reads of a turn other than its own: enough for the
// LLM view's order and placeholders (record.LLMView).
type head struct {
	ID        string        `json:"turn_id"`
	StartedAt time.Time     `json:"started_at"`
	Status    record.Status `json:"status"`
	Pending   []callState   `json:"pending,omitempty"`
	// Supersedes: the window leaves out the turn this one replaced.
	Supersedes string `json:"supersedes,omitempty"`
}

type callState struct {
	CallID string           `json:"call_id"`
	State  record.CallState `json:"state"`
	// Tool names the call's tool in its step.started, which LoadStart
	// writes (none in heads written before it did).
	Tool string `json:"tool,omitempty"`
}

// SaveTurn writes t's own fields (never another turn's), adds artifacts
// to the catalog, keeps the turn index, the active set and the
// skill-inputs summary, records the update time and the first title, and
// refreshes the idle expiry of every key of the conversation, in one
// script. A turn of a conversation that no longer exists is not written
// (record.ErrNotFound): a step still running when its conversation is
// deleted must not bring the deleted record back.
func (s *Store) SaveTurn(ctx context.Context, cid string, t *record.Turn, arts ...artifact.Artifact) error {
	_, err := s.saveTurn(ctx, cid, t, arts, s.written.version(), saveTurnScript(), false)
	return err
}

// saveTurn runs script, one of saveTurnLua's, for t stored under version,
// with tail, the arguments the script takes after the turn's (a read
// ahead's, whose reply it returns when readsAhead; nil without one).
func (s *Store) saveTurn(ctx context.Context, cid string, t *record.Turn, arts []artifact.Artifact, version string, script *redis.Script, readsAhead bool, tail ...any) ([]any, error) {
	if t == nil || t.ID == "" {
		return nil, fmt.Errorf("save turn of %s: turn id is required", cid)
	}
	args, body, msgs, err := s.turnArgs(t, arts, version)
	if err != nil {
		return nil, fmt.Errorf("save turn %s of %s: %w", t.ID, cid, err)
	}
	var early *decoding
	if readsAhead {
		// The step after this one takes the turn without a read of its
		// own: it is decoded while the write is in flight.
		early = decode(t.ID, string(body), string(msgs))
	}
	reply, err := script.Run(ctx, s.rdb, s.turnKeys(cid, t.ID), append(args, tail...)...).Result()
	if err != nil {
		s.written.forget(cid, t.ID) // the write may have been stored, or not
		return nil, fmt.Errorf("save turn %s of %s: %w", t.ID, cid, classify(err))
	}
	n, read := turnReply(reply)
	switch n {
	case 0:
		return nil, fmt.Errorf("save turn %s of %s: %w", t.ID, cid, record.ErrNotFound)
	case -1:
		return nil, fmt.Errorf("save turn %s of %s: %w", t.ID, cid, record.ErrCancelled)
	case -3:
		return nil, fmt.Errorf("save turn %s of %s: %w", t.ID, cid, record.ErrReadFirst)
	}
	s.written.keepDecoding(cid, t.ID, version, string(body), string(msgs), true, early)
	return read, nil
}

// turnReply is a turn write's reply: its code (1 written, 0 no such
// conversation, -1 cancelled, -2 refused by its guard, -3 a first write
// whose conversation is not as it assumes) and, with a read
// ahead, the whole reply {code, token number, the read}.
func turnReply(reply any) (int64, []any) {
	read, _ := reply.([]any)
	n, _ := reply.(int64)
	if read != nil {
		n, _ = read[0].(int64)
	}
	return n, read
}

// Rename sets the title List shows (the 'title' field), when the
// conversation exists.
func (s *Store) Rename(ctx context.Context, cid, title string) error {
	n, err := renameScript().Run(ctx, s.rdb, []string{convKey(cid)}, title, int64(s.ttl/time.Second)).Int()
	if err != nil {
		return fmt.Errorf("rename %s: %w", cid, classify(err))
	}
	if n == 0 {
		return fmt.Errorf("rename %s: %w", cid, record.ErrNotFound)
	}
	return nil
}

var renameScript = lazyScript(`
if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'title', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2], 'XX')
return 1
`)

// MarkCancelled stores cancel:<tid> beside the turn, which SaveTurn's
// script checks: from then on only the cancelled turn is written, and
// StartCall starts no call of it. In the same script it returns the calls
// StartCall had started by then: the cancel cannot stop them, so their
// outcomes are recorded when they end. Marking twice keeps the first time.
func (s *Store) MarkCancelled(ctx context.Context, cid, turnID string) ([]string, error) {
	ids, err := markCancelledScript().Run(ctx, s.rdb, []string{convKey(cid), resultsKey(cid, turnID)},
		turnID, time.Now().UTC().Format(time.RFC3339Nano), int64(s.ttl/time.Second)).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("mark turn %s of %s cancelled: %w", turnID, cid, classify(err))
	}
	return ids, nil
}

var markCancelledScript = lazyScript(`
redis.call('HSETNX', KEYS[1], 'cancel:' .. ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3], 'XX')
local started = {}
for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
  if string.sub(f, 1, 6) == 'start:' then started[#started + 1] = string.sub(f, 7) end
end
return started
`)

// StartCall records that callID of turnID starts now, unless the turn is
// marked cancelled or its conversation is deleted (a step still in flight
// does not write the deleted record back): the one point where a call and
// a cancel are ordered (MarkCancelled runs in the same server, one script
// at a time). A call
// started before is started again (a retried invoke). evs (the call's
// step.started) are appended to the event log in the same script when
// the call starts.
func (s *Store) StartCall(ctx context.Context, cid, turnID, callID string, evs ...record.Event) (bool, error) {
	args := []any{turnID, startPrefix + callID, time.Now().UTC().Format(time.RFC3339Nano), int64(s.ttl / time.Second), resultsPrefix + turnID}
	args, err := appendEventArgs(args, evs)
	if err != nil {
		return false, fmt.Errorf("start call %s of %s/%s: %w", callID, cid, turnID, err)
	}
	n, err := startCallScript().Run(ctx, s.rdb, []string{convKey(cid), resultsKey(cid, turnID), eventsKey(cid)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("start call %s of %s/%s: %w", callID, cid, turnID, classify(err))
	}
	return n == 1, nil
}

// startCallScript: KEYS conv, results:<tid>, events; ARGV tid, start:<call>,
// now, ttl, results:<tid> (the conversation's mark), then the events' JSON.
var startCallScript = lazyScript(emitLua, `
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then
  if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return 0 end
  if redis.call('HEXISTS', KEYS[1], 'cancel:' .. ARGV[1]) == 1 then return 0 end
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  redis.call('HSET', KEYS[1], ARGV[5], 1)
  redis.call('EXPIRE', KEYS[2], ARGV[4], 'XX')
end
if #ARGV > 5 then emit(KEYS[3], {unpack(ARGV, 6)}) end
return 1
`)

// turnKeys are the keys SaveTurn and LoadStep declare (every key a script
// touches is declared, as ElastiCache Serverless requires).
func (s *Store) turnKeys(cid, tid string) []string {
	return []string{convKey(cid), artifactsKey(cid), resultsKey(cid, tid), turnsKey(cid), activeKey(cid), artOrderKey(cid), inputsKey(cid), eventsKey(cid), quotaKey(cid)}
}

// turnArgs is saveTurnScript's ARGV for t, stored under version, with the
// bytes of the turn's body and messages among them.
func (s *Store) turnArgs(t *record.Turn, arts []artifact.Artifact, version string) (args []any, tb, mb []byte, err error) {
	body := *t
	body.Messages = nil
	if tb, err = json.Marshal(&body); err != nil {
		return nil, nil, nil, err
	}
	if mb, err = json.Marshal(t.Messages); err != nil {
		return nil, nil, nil, err
	}
	h := head{ID: t.ID, StartedAt: t.StartedAt, Status: t.Status, Supersedes: t.Supersedes}
	for _, pc := range t.Pending {
		h.Pending = append(h.Pending, callState{pc.CallID, pc.State, pc.Tool})
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, nil, nil, err
	}
	updated := t.UpdatedAt
	if updated.IsZero() {
		updated = time.Now().UTC()
	}
	final := "0"
	if t.Status.Final() {
		final = "1"
	}
	own := append(append([]string(nil), t.Produced...), t.Files...)
	inputs := t.NewestInputs()
	args = []any{int64(s.ttl / time.Second), t.ID, tb, mb, hb, t.ViewSize(), updated.Format(time.RFC3339Nano),
		string(t.Status), t.Text, t.StartedAt.UnixMilli(), final, strings.Join(own, ","), len(inputs), version}
	for tool, in := range inputs {
		ib, err := json.Marshal(in.Inputs)
		if err != nil {
			return nil, nil, nil, err
		}
		args = append(args, tool, strconv.FormatInt(in.At.UnixMilli(), 10)+"|"+string(ib))
	}
	args = appendFieldOps(args, t)
	events := t.Events
	if t.Spend != nil {
		events = append(append([]record.Event(nil), t.Spend.Events...), events...)
	}
	if args, err = appendEventArgs(append(args, len(events)), events); err != nil {
		return nil, nil, nil, err
	}
	for _, a := range arts {
		ab, err := json.Marshal(a)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("artifact %s: %w", a.ID, err)
		}
		args = append(args, a.ID, ab, a.CreatedAt.UnixMilli())
	}
	return args, tb, mb, nil
}

// appendFieldOps appends the field section of saveTurnScript's ARGV: the
// number of (op, field, value) triples on the conversation's hash, then
// the triples ("i": HINCRBY, "s": HSET). They are the spend, as AddSpend
// writes it, and the replaced turn's superseded field.
func appendFieldOps(args []any, t *record.Turn) []any {
	var ops []any
	if sp := t.Spend; sp != nil {
		ops = spendOps(ops, t.ID, *sp)
	}
	if t.Supersedes != "" {
		ops = append(ops, "s", supersededPrefix+t.Supersedes, t.ID)
	}
	return append(append(args, len(ops)/3), ops...)
}

// fieldOpsLua defines fieldOps(key, at), which applies the field ops
// (spendOps, appendFieldOps) whose number is ARGV[at] and which follow it
// to the hash at key, and returns the index of the ARGV after them.
const fieldOpsLua = `
local function fieldOps(key, at)
  local i = at + 1
  for _ = 1, tonumber(ARGV[at]) do
    if ARGV[i] == 'i' then redis.call('HINCRBY', key, ARGV[i + 1], ARGV[i + 2]) else redis.call('HSET', key, ARGV[i + 1], ARGV[i + 2]) end
    i = i + 3
  end
  return i
end
`

// spendOps appends the (op, field, value) triples that count sp, a
// provider call's spend, on turn turnID's counters of the conversation's
// hash ("i": HINCRBY, "s": HSET).
func spendOps(ops []any, turnID string, sp record.Spend) []any {
	ops = append(ops, "i", callsPrefix+turnID, sp.Calls, "i", tokensPrefix+turnID, sp.Tokens)
	if sp.CachedTokens != 0 {
		ops = append(ops, "i", cachedPrefix+turnID, sp.CachedTokens)
	}
	if sp.CostMicros != 0 {
		ops = append(ops, "i", costPrefix+turnID, sp.CostMicros)
	}
	if sp.WindowFrom != "" {
		ops = append(ops, "s", fieldWindow, sp.WindowFrom)
	}
	return ops
}

// saveTurnScript: KEYS conv, artifacts, results:<tid>, turns, active,
// artorder, inputs, events, quota. ARGV ttl, tid, turn, msgs, head, view size,
// updated, status, text, started (ms), final, own artifact ids, the number
// of inputs, the write's version (tv:<tid>, written.go), then (tool, "<ms>|<json>") per input, the field ops (appendFieldOps, with the spend:
// counted before the cancel check, so a refused write still counts the
// provider call it made), the number of events,
// then each event's JSON (appended to the event log in the same round
// trip), then (id, json, created ms) per artifact. The summary keeps, per tool, the newest inputs of any
// turn; concurrent turns each write only their own turn's fields.
var saveTurnScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(saveTurnLua(false, writeSaves)) })

// saveTurnAheadScript is saveTurnScript, then the read ahead (aheadLua)
// whose arguments end ARGV.
var saveTurnAheadScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(saveTurnLua(true, writeSaves)) })

// saveTurnAppendingScript is saveTurnAheadScript guarded by a call's
// outcome: its last two ARGV are the call id and the outcome's JSON, and
// the turn is written only when the turn's results hold exactly that
// outcome under that id; else nothing is written (-2). A call's outcome
// write sends it in the same round trip, after itself, with the turn that
// appends that outcome (PutOutcomeAppending).
var saveTurnAppendingScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(saveTurnLua(true, writeGuarded)) })

// saveTurnGuardedScript is saveTurnAppendingScript without the read
// ahead, for a Store that keeps none.
var saveTurnGuardedScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(saveTurnLua(false, writeGuarded)) })

// saveTurnStartingScript is saveTurnAheadScript that starts a call after
// the write: its last two ARGV are the call's id and its start time, and
// the start is LoadStart's (start:<call> in the turn's results, and
// the turn marked as having results), before the read ahead, which sees
// it (record.StartingSave). The write's own checks came first: a write
// refused (a cancel, no conversation) starts nothing.
var saveTurnStartingScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(saveTurnLua(true, writeStarts)) })

// saveTurnFirstScript is saveTurnScript for a new turn whose request
// read nothing (SaveFirstTurn): its last ARGV is the user, and the turn
// is written only when the conversation exists in this layout, is that
// user's, and has no active turn; else nothing is written (-3).
var saveTurnFirstScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(saveTurnLua(false, writeFirst)) })

// saveTurnFirstAheadScript is saveTurnFirstScript with the read ahead.
var saveTurnFirstAheadScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(saveTurnLua(true, writeFirst)) })

// writeKind is what a turn write does beyond saving the turn, and the
// arguments that end its ARGV for it (after the read ahead's, if any).
type writeKind int

const (
	writeSaves   writeKind = iota // nothing more
	writeGuarded                  // only when the results hold the outcome (call id, outcome JSON)
	writeStarts                   // then starts a call (call id, start time)
	writeFirst                    // only to a conversation as its request would have read it (the user)
)

func saveTurnLua(ahead bool, kind writeKind) string {
	check, guard, start, tail := "", "", "", 0
	switch kind {
	case writeFirst:
		// What the request would have read, checked before anything is
		// written: the conversation, its layout, its owner (in its meta's
		// JSON) and its active turns.
		check = `local m = redis.call('HMGET', KEYS[1], 'meta', 'layout')
if not m[1] or m[2] ~= '2' or redis.call('SCARD', KEYS[5]) > 0 then return -3 end
local decoded, meta = pcall(cjson.decode, m[1])
if not decoded or type(meta) ~= 'table' or meta.owner ~= ARGV[#ARGV] then return -3 end
`
		tail = 1
	case writeGuarded:
		guard = "if redis.call('HGET', KEYS[3], ARGV[#ARGV - 1]) ~= ARGV[#ARGV] then return -2 end\n"
		tail = 2
	case writeStarts:
		start = "redis.call('HSET', KEYS[3], '" + startPrefix + "' .. ARGV[#ARGV - 1], ARGV[#ARGV])\n" +
			"redis.call('HSET', KEYS[1], '" + resultsPrefix + "' .. tid, 1)\n"
		tail = 2
	}
	return emitLua + fieldOpsLua + aheadPrelude(ahead, tail) + check + `
if redis.call('HEXISTS', KEYS[1], 'meta') == 0 then return 0 end
` + guard + `local tid = ARGV[2]
local pastOps = fieldOps(KEYS[1], 15 + 2 * tonumber(ARGV[13]))
if ARGV[8] ~= 'cancelled' and redis.call('HEXISTS', KEYS[1], 'cancel:' .. tid) == 1 then return -1 end
redis.call('HSET', KEYS[1], 'turn:' .. tid, ARGV[3], 'msgs:' .. tid, ARGV[4], 'head:' .. tid, ARGV[5],
  'n:' .. tid, ARGV[6], 'arts:' .. tid, ARGV[12], '` + versionPrefix + `' .. tid, ARGV[14], 'updated', ARGV[7])
local newest = tonumber(redis.call('HGET', KEYS[1], 'status_started') or '0')
if tonumber(ARGV[10]) >= newest then redis.call('HSET', KEYS[1], 'status', ARGV[8], 'status_started', ARGV[10]) end
if ARGV[9] ~= '' then redis.call('HSETNX', KEYS[1], 'title', ARGV[9]) end
redis.call('ZADD', KEYS[4], ARGV[10], tid)
if ARGV[11] == '1' then redis.call('SREM', KEYS[5], tid) else redis.call('SADD', KEYS[5], tid) end
local i = 15
for _ = 1, tonumber(ARGV[13]) do
  local cur = redis.call('HGET', KEYS[7], ARGV[i])
  if not cur or tonumber(string.match(cur, '^(%d+)|')) <= tonumber(string.match(ARGV[i + 1], '^(%d+)|')) then
    redis.call('HSET', KEYS[7], ARGV[i], ARGV[i + 1])
  end
  i = i + 2
end
` + start + `i = pastOps
local events = tonumber(ARGV[i])
if events > 0 then emit(KEYS[8], {unpack(ARGV, i + 1, i + events)}) end
i = i + 1 + events
while i <= last do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[6], ARGV[i + 2], ARGV[i])
  i = i + 3
end
-- An active conversation is never evictable: a cache at its cap evicts only
-- keys that carry a TTL, so while any turn runs or waits the conversation's
-- keys carry none, and a turn's results none until it ends; the idle TTL
-- starts when the last turn ends. The conversation's keys carry a TTL all
-- together or none (every script that sets one on a key sets it as the
-- conversation's own key has it, or refreshes one already set), so while
-- a turn is active and the conversation's key carries none, there is
-- nothing to take off.
local live = redis.call('SCARD', KEYS[5]) > 0
if ARGV[11] == '1' then redis.call('EXPIRE', KEYS[3], ARGV[1]) else redis.call('PERSIST', KEYS[3]) end
if not live or redis.call('TTL', KEYS[1]) ~= -1 then
  for _, k in ipairs({1, 2, 4, 5, 6, 7, 9}) do
    if live then redis.call('PERSIST', KEYS[k]) else redis.call('EXPIRE', KEYS[k], ARGV[1]) end
  end
end
return ahead(` + stepKeysLua + `, tid, 1)
`
}

// putArtifactsScript: KEYS conv, artifacts, artorder; ARGV ttl, then
// (id, json, created ms) per artifact.
var putArtifactsScript = lazyScript(`
local i = 2
while i <= #ARGV do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[3], ARGV[i + 2], ARGV[i])
  i = i + 3
end
if redis.call('TTL', KEYS[1]) == -1 then
  redis.call('PERSIST', KEYS[2]); redis.call('PERSIST', KEYS[3])
else
  for k = 1, 3 do redis.call('EXPIRE', KEYS[k], ARGV[1]) end
end
return 1
`)

// PutArtifacts adds artifacts to the conversation's catalog (uploads,
// which belong to no turn yet), in one script: the catalog carries the
// conversation's TTL, or none while a turn is active (saveTurnScript).
func (s *Store) PutArtifacts(ctx context.Context, cid string, arts ...artifact.Artifact) error {
	if len(arts) == 0 {
		return nil
	}
	args := []any{int64(s.ttl / time.Second)}
	for _, a := range arts {
		ab, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("put artifact %s of %s: %w", a.ID, cid, err)
		}
		args = append(args, a.ID, ab, a.CreatedAt.UnixMilli())
	}
	err := putArtifactsScript().Run(ctx, s.rdb, []string{convKey(cid), artifactsKey(cid), artOrderKey(cid)}, args...).Err()
	if err != nil {
		return fmt.Errorf("put artifacts of %s: %w", cid, classify(err))
	}
	return nil
}

// Artifacts reads catalog entries by id (HMGET); unknown ids are left out.
func (s *Store) Artifacts(ctx context.Context, cid string, ids ...string) ([]artifact.Artifact, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := s.rdb.HMGet(ctx, artifactsKey(cid), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read artifacts of %s: %w", cid, classify(err))
	}
	var out []artifact.Artifact
	for i, v := range vals {
		raw, _ := v.(string)
		if raw == "" {
			continue
		}
		a, err := artifacts.decode(raw)
		if err != nil {
			return nil, fmt.Errorf("read artifacts of %s: %s: %w", cid, ids[i], err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Load reads the whole conversation (meta, every turn, the whole catalog,
// the skill-inputs summary) and, when turnID is set, that turn's stored
// outcomes, in one pipeline of plain reads (no transaction: a full server
// still serves them). It is for readers of the whole conversation (the
// API's conversation route); a step uses LoadStep. It returns
// record.ErrNotFound (wrapped) when the conversation has no meta.
func (s *Store) Load(ctx context.Context, cid, turnID string) (*record.Conversation, map[string]record.CallOutcome, error) {
	var conv, arts, inputs, res *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		conv = p.HGetAll(ctx, convKey(cid))
		arts = p.HGetAll(ctx, artifactsKey(cid))
		inputs = p.HGetAll(ctx, inputsKey(cid))
		if turnID != "" {
			res = p.HGetAll(ctx, resultsKey(cid, turnID))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, classify(err))
	}
	fields := conv.Val()
	m, err := decodeMeta(cid, fields[fieldMeta], fields[fieldTitle], fields[fieldUpdated])
	if err != nil {
		return nil, nil, err
	}
	var turns []*record.Turn
	for f, v := range fields {
		id, ok := strings.CutPrefix(f, turnPrefix)
		if !ok {
			continue
		}
		t, err := decodeTurn(id, v, fields[msgsPrefix+id], fields)
		if err != nil {
			return nil, nil, fmt.Errorf("load conversation %s: %w", cid, err)
		}
		turns = append(turns, t)
	}
	var catalog []artifact.Artifact
	for id, v := range arts.Val() {
		var a artifact.Artifact
		if err := unmarshal([]byte(v), &a); err != nil {
			return nil, nil, fmt.Errorf("load conversation %s: artifact %s: %w", cid, id, err)
		}
		catalog = append(catalog, a)
	}
	outcomes, err := decodeOutcomes(cid, res)
	if err != nil {
		return nil, nil, err
	}
	c := record.Assemble(m, turns, catalog)
	c.WindowFrom = fields[fieldWindow]
	if c.Inputs, err = decodeInputs(inputs.Val()); err != nil {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, err)
	}
	return c, outcomes, nil
}

// LoadStep reads what one step needs (record.Query) in one read-only
// script (EVALSHA_RO: it runs on replicas and on a full server): the
// meta; the turn in full with its outcomes; the active turns and, for a
// Window, the newest turns until their view sizes cover it (heads and
// messages only); the newest catalog entries and the turn's own; the
// skill-inputs summary. What it reads is bounded by the window and the
// catalog size, never by the conversation's length.
func (s *Store) LoadStep(ctx context.Context, cid string, q record.Query) (*record.Conversation, map[string]record.CallOutcome, error) {
	if conv, outcomes, ok, err := s.aheadTaken(cid, q); ok {
		return conv, outcomes, err
	}
	raw, own, err := s.runStep(ctx, loadStepScript(), cid, q)
	if err != nil {
		return nil, nil, err
	}
	return s.decodeStep(cid, q.TurnID, raw, own)
}

// runStep runs a step's read script, loadStepScript (read-only) or
// loadStartScript (then its extra arguments), for q, and returns its
// reply: ErrNotFound for a missing conversation, and a conversation
// stored before turns were indexed is indexed once, then read. When this
// Store keeps q's turn (written.go), the read names its version and own
// decodes it, which decodeStep takes when the reply says the turn is
// still that version.
func (s *Store) runStep(ctx context.Context, script *redis.Script, cid string, q record.Query, extra ...any) (raw []any, own *kept, err error) {
	var version string
	if q.TurnID != "" {
		if own = s.written.take(cid, q.TurnID); own != nil {
			version = own.version
		}
	}
	args := append(append([]any{q.TurnID}, queryOf(q).args(version)...), extra...)
	run := script.Run
	if script == loadStepScript() {
		run = script.RunRO // EVALSHA_RO: it runs on replicas and on a full server
	}
	raw, err = run(ctx, s.rdb, s.turnKeys(cid, q.TurnID), args...).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, record.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, classify(err))
	}
	if len(raw) == 1 {
		if err := s.migrate(ctx, cid); err != nil {
			return nil, nil, err
		}
		return s.runStep(ctx, script, cid, q, extra...)
	}
	return raw, own, nil
}

// LoadStart is LoadStep of q.TurnID with its outcomes and, in the same
// script, StartCall of callID when the call may start: no outcome is
// stored for it, and it is ready in a turn that has not ended, or running
// (a call that had started when its turn was cancelled, resumed). A ready
// call starts unless the turn is marked cancelled; one started before
// starts again. The read is what the store held just before the start, so
// the caller's view of the call and the store's decision are one atomic
// step: an invoke reads and starts its call in one round trip (issue 29).
// A call that did not start left the store as it was.
func (s *Store) LoadStart(ctx context.Context, cid string, q record.Query, start record.Start) (*record.Conversation, map[string]record.CallOutcome, bool, error) {
	callID := start.CallID
	if q.TurnID == "" || callID == "" {
		return nil, nil, false, fmt.Errorf("load and start a call of %s: turn and call id are required", cid)
	}
	q.Outcomes = true
	if conv, outcomes, ok, err := s.startTaken(cid, q, callID); ok {
		return conv, outcomes, true, err // the write that asked for the call started it (SaveTurnStarting)
	}
	args := []any{callID, time.Now().UTC().Format(time.RFC3339Nano), int64(s.ttl / time.Second)}
	for _, e := range start.Events {
		b, err := e.MarshalJSON()
		if err != nil {
			return nil, nil, false, fmt.Errorf("start call %s of %s/%s: event %s: %w", callID, cid, q.TurnID, e.Type, err)
		}
		// The script writes the event's parts joined by the call's tool.
		parts := bytes.Split(b, callToolJSON())
		args = append(args, len(parts))
		for _, p := range parts {
			args = append(args, p)
		}
	}
	raw, own, err := s.runStep(ctx, loadStartScript(), cid, q, args...)
	if err != nil {
		return nil, nil, false, err
	}
	if len(raw) != 10 {
		return nil, nil, false, fmt.Errorf("load conversation %s: unexpected reply of %d parts", cid, len(raw))
	}
	started, _ := raw[9].(int64)
	conv, outcomes, err := s.decodeStep(cid, q.TurnID, raw[:9], own)
	if err == nil && started == 2 {
		// A head written before heads named their calls' tools: the
		// events are written here, with the tool the read found.
		var t *record.Turn
		if t, _ = conv.Turn(q.TurnID); t != nil {
			for i := range t.Pending {
				if t.Pending[i].CallID == callID {
					err = s.Emit(ctx, cid, start.Told(t.Pending[i].Tool)...)
				}
			}
		}
	}
	return conv, outcomes, started > 0, err
}

// callToolJSON is record.CallTool as json.Marshal writes it, made at its
// first use (nothing of the package computes at init).
var callToolJSON = sync.OnceValue(func() []byte {
	b, _ := json.Marshal(record.CallTool)
	return b
})

// readStepLua defines readStep(K, tid, window, size, outcomes, version),
// the Lua of LoadStep. K names the keys (conv, arts, results, turns,
// active, order, inputs: turnKeys' first seven); the rest are the Query's
// turn, window, catalog size (0: no catalog nor inputs, record.NoCatalog),
// outcomes ('1'/'0') and the version of the turn's write the reader has
// (written.go; "" for none). It returns nil
// for a missing conversation, {"migrate"} for one stored before this
// layout, else {meta fields, own fields, window turn ids, their heads and
// messages, artifact JSONs, the catalog's size, outcomes, inputs, active
// turns (id, fields)…}, and the own turn's fields. The step's own turn and
// the active ones are read whole (the API answers their task tokens); the
// window's other turns only as far as the LLM view needs them. The own
// turn's body is "=" and its messages nil when its version is the
// reader's: the reader has them. loadStepScript runs it alone, loadStartScript
// before its start, and the writes that read ahead (aheadLua) after
// their write.
const readStepLua = `
local function readStep(K, tid, window, size, withOutcomes, version)
  local m = redis.call('HMGET', K.conv, 'meta', 'title', 'updated', 'layout', 'window')
  if not m[1] then return nil, {} end
  if m[4] ~= '2' then return {'migrate'}, {} end
  -- whole reads turn id's fields; lean reads its small head in place of
  -- its body and messages, for a reader that has them.
  local function whole(id, lean)
    local body, msgs = 'turn:' .. id, 'msgs:' .. id
    if lean then body, msgs = 'head:' .. id, 'head:' .. id end
    return redis.call('HMGET', K.conv, body, msgs, 'answered:' .. id, 'llm_calls:' .. id, 'tokens:' .. id, 'arts:' .. id, 'cached:' .. id, 'cost:' .. id, 'cancel:' .. id, 'superseded:' .. id, '` + versionPrefix + `' .. id)
  end
  local own = {}
  if tid ~= '' then
    if version ~= '' and redis.call('HGET', K.conv, '` + versionPrefix + `' .. tid) == version then
      -- The reader has this version of the turn: its body and messages
      -- are not read, nor sent.
      own = whole(tid, true)
      if own[1] then own[1] = '='; own[2] = false end
    else
      own = whole(tid)
    end
  end
  local seen = {}
  seen[tid] = true
  local active = {}
  for _, id in ipairs(redis.call('SMEMBERS', K.active)) do
    if not seen[id] then seen[id] = true; active[#active + 1] = id; active[#active + 1] = whole(id) end
  end
  local ids = {}
  local sum, from = 0, 0
  window = tonumber(window)
  while sum < window do
    local page = redis.call('ZREVRANGE', K.turns, from, from + 15)
    if #page == 0 then break end
    local names = {}
    for i, id in ipairs(page) do names[i] = 'n:' .. id end
    local sizes = redis.call('HMGET', K.conv, unpack(names))
    for i, id in ipairs(page) do
      if id ~= tid then
        if not seen[id] then seen[id] = true; ids[#ids + 1] = id end
        sum = sum + (tonumber(sizes[i]) or 1)
        if sum >= window then break end
      end
    end
    from = from + 16
  end
  local bodies = {}
  if #ids > 0 then
    local names = {}
    for _, id in ipairs(ids) do names[#names + 1] = 'head:' .. id; names[#names + 1] = 'msgs:' .. id end
    bodies = redis.call('HMGET', K.conv, unpack(names))
  end
  -- A size of 0 reads no catalog and no inputs (record.NoCatalog).
  size = tonumber(size)
  local artIDs, count, inputs = {}, 0, {}
  if size > 0 then
    artIDs = redis.call('ZREVRANGE', K.order, 0, size - 1)
    count = redis.call('ZCARD', K.order)
    inputs = redis.call('HGETALL', K.inputs)
  end
  if own[6] and own[6] ~= '' then
    for id in string.gmatch(own[6], '[^,]+') do artIDs[#artIDs + 1] = id end
  end
  local arts = {}
  if #artIDs > 0 then arts = redis.call('HMGET', K.arts, unpack(artIDs)) end
  local outcomes = {}
  if withOutcomes == '1' then outcomes = redis.call('HGETALL', K.results) end
  return {m, own, ids, bodies, arts, count, outcomes, inputs, active}, own
end
`

// stepKeysLua is readStep's K for a script whose KEYS are turnKeys.
const stepKeysLua = `{conv = KEYS[1], arts = KEYS[2], results = KEYS[3], turns = KEYS[4], active = KEYS[5], order = KEYS[6], inputs = KEYS[7]}`

// loadStepScript: KEYS as turnKeys; ARGV tid, window, catalog size,
// outcomes (1/0), the version of the turn's write the reader has.
var loadStepScript = lazyScript(readStepLua + `return (readStep(` + stepKeysLua + `, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]))`)

// loadStartScript is readStep, then StartCall's rule for the call ARGV[6]
// (now ARGV[7], ttl ARGV[8]): its state, its tool and the turn's status
// come from the turn's head, the small summary SaveTurn writes with it.
// Then, per event to write when the call starts, the number of its parts
// and the parts, which the script joins with the tool's JSON. Its reply is
// readStep's with the start last: 1, 0 when the call did not start, 2
// when it started but its head names no tool (the events are not written).
var loadStartScript = lazyScript(emitLua, readStepLua+`
local tid = ARGV[1]
local reply, own = readStep(`+stepKeysLua+`, tid, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if type(reply) ~= 'table' or type(reply[1]) ~= 'table' then return reply end
local call, started = ARGV[6], 0
if redis.call('HEXISTS', KEYS[3], call) == 0 then
  local state, tool, final = nil, nil, false
  local h = redis.call('HGET', KEYS[1], 'head:' .. tid)
  if h then
    local hd = cjson.decode(h)
    final = `+finalStatusesLua()+`[hd.status] == true
    if type(hd.pending) == 'table' then
      for _, pc in ipairs(hd.pending) do
        if pc.call_id == call then state, tool = pc.state, pc.tool end
      end
    end
  end
  if state == '`+string(record.CallRunning)+`' or (state == '`+string(record.CallReady)+`' and not final) then
    if redis.call('HEXISTS', KEYS[3], '`+startPrefix+`' .. call) == 1 then
      started = 1
    elseif not own[9] then
      redis.call('HSET', KEYS[3], '`+startPrefix+`' .. call, ARGV[7])
      redis.call('HSET', KEYS[1], '`+resultsPrefix+`' .. tid, 1)
      redis.call('EXPIRE', KEYS[3], ARGV[8], 'XX')
      started = 1
    end
  end
  if started == 1 and #ARGV > 8 then
    if type(tool) ~= 'string' then
      started = 2
    else
      local i, sep, evs = 9, cjson.encode(tool), {}
      while i <= #ARGV do
        local n = tonumber(ARGV[i])
        evs[#evs + 1] = table.concat({unpack(ARGV, i + 1, i + n)}, sep)
        i = i + 1 + n
      end
      emit(KEYS[8], evs)
    end
  end
end
reply[10] = started
return reply`)

// finalStatusesLua is a Lua table literal of the statuses of a turn that
// has ended (record.Status.Final).
func finalStatusesLua() string {
	var b strings.Builder
	b.WriteString("({")
	for _, st := range []record.Status{record.StatusRunning, record.StatusAwaitingInput, record.StatusAwaitingApproval,
		record.StatusSucceeded, record.StatusFailed, record.StatusExpired, record.StatusSuperseded, record.StatusCancelled, record.StatusBlocked} {
		if st.Final() {
			b.WriteString("['" + string(st) + "'] = true, ")
		}
	}
	b.WriteString("})")
	return b.String()
}

// decodeStep decodes readStep's reply for turn tid; own, when set, is
// the turn as this Store kept it (runStep), which stands in for the
// reply's when it says the turn is that version. The turn as stored is
// kept again for the next read (written.settle).
func (s *Store) decodeStep(cid, tid string, raw []any, own *kept) (*record.Conversation, map[string]record.CallOutcome, error) {
	if len(raw) != 9 {
		return nil, nil, fmt.Errorf("load conversation %s: unexpected reply of %d parts", cid, len(raw))
	}
	m := strs(raw[0])
	meta, err := decodeMeta(cid, m[0], m[1], m[2])
	if err != nil {
		return nil, nil, err
	}
	var turns []*record.Turn
	whole := func(id string, f []string) error {
		if len(f) < 5 || f[0] == "" {
			return nil
		}
		fields := map[string]string{
			answeredPrefix + id: f[2], callsPrefix + id: f[3], tokensPrefix + id: f[4], cachedPrefix + id: at(f, 6), costPrefix + id: at(f, 7), cancelPrefix + id: at(f, 8), supersededPrefix + id: at(f, 9)}
		var t *record.Turn
		var err error
		if f[0] == unchangedTurn && id == tid && own != nil {
			if t, err = own.decoded(); err == nil {
				applyTurnFields(t, fields)
			}
		} else {
			t, err = decodeTurn(id, f[0], f[1], fields)
		}
		if id == tid && err == nil {
			s.written.settle(cid, tid, own, f[0], f[1], at(f, 10))
		}
		if err != nil {
			return fmt.Errorf("load conversation %s: %w", cid, err)
		}
		turns = append(turns, t)
		return nil
	}
	if tid != "" {
		if err := whole(tid, strs(raw[1])); err != nil {
			return nil, nil, err
		}
	}
	active, _ := raw[8].([]any)
	for i := 0; i+1 < len(active); i += 2 {
		id, _ := active[i].(string)
		if err := whole(id, strs(active[i+1])); err != nil {
			return nil, nil, err
		}
	}
	ids, bodies := strs(raw[2]), strs(raw[3])
	for i, id := range ids {
		if 2*i+1 >= len(bodies) || bodies[2*i] == "" {
			continue
		}
		var h head
		if err := unmarshal([]byte(bodies[2*i]), &h); err != nil {
			return nil, nil, fmt.Errorf("load conversation %s: head of %s: %w", cid, id, err)
		}
		t := &record.Turn{ID: id, StartedAt: h.StartedAt, Status: h.Status, Supersedes: h.Supersedes}
		for _, p := range h.Pending {
			t.Pending = append(t.Pending, record.PendingCall{CallID: p.CallID, Tool: p.Tool, State: p.State})
		}
		if err := unmarshal([]byte(bodies[2*i+1]), &t.Messages); err != nil {
			return nil, nil, fmt.Errorf("load conversation %s: messages of %s: %w", cid, id, err)
		}
		turns = append(turns, t)
	}
	var catalog []artifact.Artifact
	seen := map[string]bool{}
	for _, v := range strs(raw[4]) {
		if v == "" {
			continue
		}
		a, err := artifacts.decode(v)
		if err != nil {
			return nil, nil, fmt.Errorf("load conversation %s: artifact: %w", cid, err)
		}
		if !seen[a.ID] {
			seen[a.ID] = true
			catalog = append(catalog, a)
		}
	}
	var outcomes map[string]record.CallOutcome
	if tid != "" {
		outcomes = map[string]record.CallOutcome{}
		kv := strs(raw[6])
		for i := 0; i+1 < len(kv); i += 2 {
			if strings.HasPrefix(kv[i], startPrefix) {
				continue
			}
			var o record.CallOutcome
			if err := unmarshal([]byte(kv[i+1]), &o); err != nil {
				return nil, nil, fmt.Errorf("load conversation %s: outcome %s: %w", cid, kv[i], err)
			}
			outcomes[kv[i]] = o
		}
	}
	c := record.Assemble(meta, turns, catalog)
	c.WindowFrom = at(m, 4)
	if total, _ := raw[5].(int64); int(total) > len(catalog) {
		c.ArtifactTotal = int(total)
	}
	in := map[string]string{}
	kv := strs(raw[7])
	for i := 0; i+1 < len(kv); i += 2 {
		in[kv[i]] = kv[i+1]
	}
	if c.Inputs, err = decodeInputs(in); err != nil {
		return nil, nil, fmt.Errorf("load conversation %s: %w", cid, err)
	}
	return c, outcomes, nil
}

// strs reads a script's array reply; nil entries become "".
func strs(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, e := range arr {
		out[i], _ = e.(string)
	}
	return out
}

func decodeMeta(cid, metaJSON, title, updated string) (record.Meta, error) {
	if metaJSON == "" {
		return record.Meta{}, fmt.Errorf("load conversation %s: %w", cid, record.ErrNotFound)
	}
	m, err := metas.decode(metaJSON)
	if err != nil {
		return m, fmt.Errorf("load conversation %s: meta: %w", cid, err)
	}
	if title != "" { // a rename, or the first message's text
		m.Title = record.Title(title)
	}
	if ts, err := time.Parse(time.RFC3339Nano, updated); err == nil {
		m.UpdatedAt = ts
	}
	return m, nil
}

// decodeTurn reads a turn's field and, when stored apart, its messages;
// at is f[i], or "" past its end.
func at(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// fields holds the turn's answered token and spend counters.
func decodeTurn(id, body, msgs string, fields map[string]string) (*record.Turn, error) {
	t, err := decodeTurnBody(id, body, msgs)
	if err != nil {
		return nil, err
	}
	applyTurnFields(t, fields)
	return t, nil
}

// unchangedTurn is readStep's body of a turn whose version is the one the
// reader named: the reader has the turn.
const unchangedTurn = "="

// decodeTurnBody decodes a turn's body and messages as SaveTurn writes them.
func decodeTurnBody(id, body, msgs string) (*record.Turn, error) {
	t := new(record.Turn)
	if err := unmarshal([]byte(body), t); err != nil {
		return nil, fmt.Errorf("turn %s: %w", id, err)
	}
	if msgs != "" {
		if err := unmarshal([]byte(msgs), &t.Messages); err != nil {
			return nil, fmt.Errorf("messages of turn %s: %w", id, err)
		}
	}
	return t, nil
}

// applyTurnFields fills in what the conversation's hash keeps beside the
// turn's body (its counters, the answered token, the cancel and the
// replacing turn).
func applyTurnFields(t *record.Turn, fields map[string]string) {
	t.AnsweredToken = fields[answeredPrefix+t.ID]
	t.CancelRequested = fields[cancelPrefix+t.ID] != ""
	t.SupersededBy = fields[supersededPrefix+t.ID]
	if n, err := strconv.Atoi(fields[callsPrefix+t.ID]); err == nil {
		t.LLMCalls = n
	}
	if n, err := strconv.Atoi(fields[tokensPrefix+t.ID]); err == nil {
		t.Tokens = n
	}
	if n, err := strconv.Atoi(fields[cachedPrefix+t.ID]); err == nil {
		t.CachedTokens = n
	}
	if n, err := strconv.ParseInt(fields[costPrefix+t.ID], 10, 64); err == nil {
		t.CostMicros = n
	}
}

// Outcomes reads the outcomes of turnIDs in one pipeline of HGETALLs.
func (s *Store) Outcomes(ctx context.Context, cid string, turnIDs ...string) (map[string]map[string]record.CallOutcome, error) {
	if len(turnIDs) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(turnIDs))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range turnIDs {
			cmds[i] = p.HGetAll(ctx, resultsKey(cid, id))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read outcomes of %s: %w", cid, classify(err))
	}
	out := make(map[string]map[string]record.CallOutcome, len(turnIDs))
	for i, id := range turnIDs {
		o, err := decodeOutcomes(cid, cmds[i])
		if err != nil {
			return nil, err
		}
		out[id] = o
	}
	return out, nil
}

func decodeOutcomes(cid string, res *redis.MapStringStringCmd) (map[string]record.CallOutcome, error) {
	if res == nil {
		return nil, nil
	}
	out := make(map[string]record.CallOutcome, len(res.Val()))
	for id, v := range res.Val() {
		if strings.HasPrefix(id, startPrefix) {
			continue
		}
		var o record.CallOutcome
		if err := unmarshal([]byte(v), &o); err != nil {
			return nil, fmt.Errorf("load conversation %s: outcome %s: %w", cid, id, err)
		}
		out[id] = o
	}
	return out, nil
}

func decodeInputs(fields map[string]string) (map[string]record.SkillInputs, error) {
	if len(fields) == 0 {
		return nil, nil
	}
	out := make(map[string]record.SkillInputs, len(fields))
	for tool, v := range fields {
		ms, body, ok := strings.Cut(v, "|")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("inputs of %s: %q", tool, v)
		}
		in := record.SkillInputs{At: time.UnixMilli(n).UTC()}
		if err := unmarshal([]byte(body), &in.Inputs); err != nil {
			return nil, fmt.Errorf("inputs of %s: %w", tool, err)
		}
		out[tool] = in
	}
	return out, nil
}

// migrate rewrites a conversation stored before turns were indexed in this
// layout (every turn whole in its turn:<tid> field): each turn is saved
// again, which indexes it and splits its messages out, then the layout is
// marked. Saving is idempotent, so concurrent migrations are harmless.
func (s *Store) migrate(ctx context.Context, cid string) error {
	conv, _, err := s.Load(ctx, cid, "")
	if err != nil {
		return err
	}
	for _, t := range conv.Turns {
		if err := s.SaveTurn(ctx, cid, t); err != nil {
			return fmt.Errorf("migrate conversation %s: %w", cid, err)
		}
	}
	order := make([]redis.Z, 0, len(conv.Artifacts))
	for _, a := range conv.Artifacts {
		order = append(order, redis.Z{Score: float64(a.CreatedAt.UnixMilli()), Member: a.ID})
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(order) > 0 {
			p.ZAdd(ctx, artOrderKey(cid), order...)
			p.Expire(ctx, artOrderKey(cid), s.ttl)
		}
		p.HSet(ctx, convKey(cid), fieldLayout, layout)
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate conversation %s: %w", cid, classify(err))
	}
	return nil
}

// Delete removes every key of the conversation: one read of the turn ids
// (the index, and the results markers of turns never saved), then one
// pipeline of DELs naming each key, so no script touches a key it did not
// declare (ElastiCache Serverless refuses that). The owner's index entry
// is pruned by the next List.
func (s *Store) Delete(ctx context.Context, cid string) error {
	var turns *redis.StringSliceCmd
	var fields *redis.StringSliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		turns = p.ZRange(ctx, turnsKey(cid), 0, -1)
		fields = p.HKeys(ctx, convKey(cid))
		return nil
	}); err != nil {
		return fmt.Errorf("delete conversation %s: %w", cid, classify(err))
	}
	ids := map[string]bool{}
	for _, id := range turns.Val() {
		ids[id] = true
	}
	for _, f := range fields.Val() {
		for _, prefix := range []string{turnPrefix, resultsPrefix} {
			if id, ok := strings.CutPrefix(f, prefix); ok {
				ids[id] = true
			}
		}
	}
	keys := []string{convKey(cid), artifactsKey(cid), turnsKey(cid), activeKey(cid), artOrderKey(cid), inputsKey(cid), eventsKey(cid)}
	for id := range ids {
		keys = append(keys, resultsKey(cid, id))
	}
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		p.Publish(ctx, eventsKey(cid), "") // the log's readers drop what they knew of it
		return nil
	}); err != nil {
		return fmt.Errorf("delete conversation %s: %w", cid, classify(err))
	}
	s.dropNews(cid)
	return nil
}

// classify wraps a store error with the record fault callers branch on: a
// write refused for lack of memory is record.ErrFull; a server that does
// not answer in time, refuses connections or whose pool is exhausted is
// record.ErrUnavailable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "OOM ") {
		return fmt.Errorf("%w: %w", record.ErrFull, err)
	}
	var nerr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &nerr):
		return fmt.Errorf("%w: %w", record.ErrUnavailable, err)
	}
	return err
}
