package sfnlocal

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Snapshot is the persisted state of an execution. A running one is saved
// at the boundaries a crash must not lose (runGraph says which); one that has
// ended is saved once more, whole, and kept for its Persister's retention,
// so that DescribeExecution and GetExecutionHistory answer for it after it
// has left memory. It holds references-sized data only: the execution, the
// position (state name + its input + variables), the history and the open
// token or retry timer.
type Snapshot struct {
	Execution        Execution       `json:"execution"`
	StateMachineName string          `json:"stateMachineName"`
	Definition       json.RawMessage `json:"definition,omitempty"`
	// DefinitionHash names the definition, which RedisPersister stores apart.
	DefinitionHash string          `json:"definitionHash,omitempty"`
	State          string          `json:"state,omitempty"`
	StateInput     json.RawMessage `json:"stateInput,omitempty"`
	Variables      map[string]any  `json:"variables,omitempty"`
	History        []HistoryEvent  `json:"history,omitempty"`
	Wait           *persistedWait  `json:"wait,omitempty"`
	Retry          *persistedRetry `json:"retry,omitempty"`
}

// DefaultRetention is how long a Persister keeps an ended execution when
// its Retention is zero.
const DefaultRetention = 24 * time.Hour

// Persister stores snapshots of executions.
type Persister interface {
	// Save stores the snapshot of a running execution, replacing the last.
	Save(ctx context.Context, s Snapshot) error
	// End stores the snapshot of an execution that has ended, for the
	// persister's retention; LoadAll no longer returns it.
	End(ctx context.Context, s Snapshot) error
	// Load returns the snapshot of execArn, running or ended; one never
	// stored, or expired, is ErrExecutionDoesNotExist.
	Load(ctx context.Context, execArn string) (Snapshot, error)
	// LoadAll returns the snapshots of the running executions.
	LoadAll(ctx context.Context) ([]Snapshot, error)
}

// Claimer is a Persister that stores a new execution's first snapshot
// only when no execution of its ARN is stored, running or ended: the
// check StartExecution makes that a name is free and the execution's
// first save, in one step. Claim reports whether it stored s.
type Claimer interface {
	Claim(ctx context.Context, s Snapshot) (bool, error)
}

// snapshot returns what to persist of x at c (nil: x has ended, no
// position). ok is false for a position of an execution that has ended
// meanwhile: a late save must not bring it back.
func (x *execution) snapshot(c *cursor) (s Snapshot, ok bool, err error) {
	s = Snapshot{StateMachineName: x.sm.name, Definition: x.sm.definition, DefinitionHash: x.sm.defHash}
	if c != nil {
		in, err := encodeValue(c.input)
		if err != nil {
			return Snapshot{}, false, fmt.Errorf("encode state input: %w", err)
		}
		s.State, s.StateInput, s.Wait, s.Retry = c.state, in, c.wait, c.retry
		s.Variables = make(map[string]any, len(c.vars))
		for k, v := range c.vars {
			s.Variables[k] = v
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if (c != nil) != (x.meta.Status == StatusRunning) {
		return Snapshot{}, false, nil
	}
	s.Execution = x.meta
	s.History = append([]HistoryEvent(nil), x.history...)
	return s, true, nil
}

// restore rebuilds an execution from its snapshot; an ended one is closed
// and read-only (sm may be nil).
func restore(s Snapshot, sm *machine) *execution {
	x := newExecution(s.Execution, sm)
	x.history = s.History
	if s.Execution.Status != StatusRunning {
		close(x.done)
	}
	return x
}

// Resume loads the persisted running executions and runs them again from
// their last saved boundary. One that was waiting on a task token waits
// again on the same token (its TimeoutSeconds deadline kept, its heartbeat
// timer restarted); one waiting to retry a task retries it at the same
// time with the same counts. One that was inside a task runs that task
// again: delivery is at-least-once, as Lambda retries are, and a Choice or
// Pass after the last save runs again too. A Map in flight restarts from
// the Map state's input. State machines that are not created yet are
// created from the snapshot's definition.
func (e *Engine) Resume(ctx context.Context) error {
	if e.persist == nil {
		return nil
	}
	snaps, err := e.persist.LoadAll(ctx)
	if err != nil {
		return fmt.Errorf("load execution snapshots: %w", err)
	}
	for _, s := range snaps {
		if s.Execution.Status != StatusRunning {
			continue
		}
		smArn := s.Execution.StateMachineArn
		if len(s.Definition) > 0 {
			arn, err := e.CreateStateMachine(s.StateMachineName, s.Definition)
			if err != nil && !errors.Is(err, ErrStateMachineAlreadyExists) {
				return fmt.Errorf("resume %s: %w", s.Execution.ExecutionArn, err)
			}
			if arn != "" {
				smArn = arn
			}
		}
		e.mu.Lock()
		sm := e.machines[smArn]
		_, exists := e.execs[s.Execution.ExecutionArn]
		e.mu.Unlock()
		if exists {
			continue
		}
		if sm == nil {
			return fmt.Errorf("resume %s: state machine %s is neither created nor stored", s.Execution.ExecutionArn, smArn)
		}
		g := sm.root
		if g.States[s.State] == nil {
			return fmt.Errorf("resume %s: state %q is not in state machine %s", s.Execution.ExecutionArn, s.State, smArn)
		}
		var input any
		if err := json.Unmarshal(s.StateInput, &input); err != nil {
			return fmt.Errorf("resume %s: decode state input: %w", s.Execution.ExecutionArn, err)
		}
		x := restore(s, sm)
		vars := s.Variables
		if vars == nil {
			vars = map[string]any{}
		}
		if s.Wait != nil {
			// Open the token before Resume returns, so an answer sent right
			// after Resume finds it.
			x.openToken(s.Wait.Token, e.clock.Now())
		}
		e.mu.Lock()
		e.execs[s.Execution.ExecutionArn] = x
		e.mu.Unlock()
		e.log.InfoContext(ctx, "execution resumed", "execution", s.Execution.ExecutionArn, "state", s.State, "waiting", s.Wait != nil)
		e.launch(x, &cursor{state: s.State, input: input, vars: vars, wait: s.Wait, retry: s.Retry})
	}
	return nil
}

// RedisPersister keeps snapshots in Valkey/Redis, written incrementally so
// a save costs what it adds, not the whole execution again: the position
// (state, input, variables, token) under Prefix+"exec:"+arn, the history as
// a list Prefix+"hist:"+arn that each save appends the new events to, the
// definition once per process under Prefix+"def:"+its hash, and a set
// Prefix+"execs" of the running executions' ARNs. An ended execution's two
// keys expire after Retention (default DefaultRetention). Prefix defaults
// to "sfnlocal:".
type RedisPersister struct {
	Client    redis.UniversalClient
	Prefix    string
	Retention time.Duration

	mu    sync.Mutex
	saved map[string]int  // arn → history events stored by this process
	defs  map[string]bool // definitions stored by this process, by hash
}

var (
	_ Persister = (*RedisPersister)(nil)
	_ Claimer   = (*RedisPersister)(nil)
)

func (p *RedisPersister) prefix() string {
	if p.Prefix == "" {
		return "sfnlocal:"
	}
	return p.Prefix
}

// Save stores the position and appends the history events not stored yet,
// in one MULTI/EXEC. The first save of an execution in this process
// rewrites its whole history and indexes its ARN.
func (p *RedisPersister) Save(ctx context.Context, s Snapshot) error {
	return p.write(ctx, s, false)
}

// End stores the ended execution like Save, sets both its keys to expire
// after the retention and takes it out of the running set.
func (p *RedisPersister) End(ctx context.Context, s Snapshot) error {
	return p.write(ctx, s, true)
}

func (p *RedisPersister) write(ctx context.Context, s Snapshot, ended bool) error {
	arn := s.Execution.ExecutionArn
	b, defHash, sendDef, err := p.position(s)
	if err != nil {
		return err
	}
	p.mu.Lock()
	n, known := p.saved[arn]
	p.mu.Unlock()
	if n > len(s.History) {
		known = false
	}
	from := n
	if !known {
		from = 0
	}
	events, err := appendHistory(nil, arn, s.History[from:])
	if err != nil {
		return err
	}
	ek, hk := p.prefix()+"exec:"+arn, p.prefix()+"hist:"+arn
	ttl := cmp.Or(p.Retention, DefaultRetention)
	_, err = p.Client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		if ended {
			pipe.Set(ctx, ek, b, ttl)
		} else {
			pipe.Set(ctx, ek, b, 0)
		}
		if sendDef {
			pipe.SetNX(ctx, p.prefix()+"def:"+defHash, []byte(s.Definition), 0)
		}
		if !known {
			pipe.Del(ctx, hk)
		}
		if len(events) > 0 {
			pipe.RPush(ctx, hk, events...)
		}
		switch {
		case ended:
			pipe.Expire(ctx, hk, ttl)
			pipe.SRem(ctx, p.prefix()+"execs", arn)
		case !known:
			pipe.SAdd(ctx, p.prefix()+"execs", arn)
		}
		return nil
	})
	if err != nil || ended {
		// After an error what was stored is unknown: the next save rewrites it all.
		p.mu.Lock()
		delete(p.saved, arn)
		p.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("save snapshot %s: %w", arn, err)
	}
	p.stored(arn, len(s.History), !ended, defHash, sendDef)
	return nil
}

// position is what the exec key holds of s (s without its history and
// definition, with the definition's hash), the hash, and whether the
// definition is still to be stored by this process.
func (p *RedisPersister) position(s Snapshot) (b []byte, defHash string, sendDef bool, err error) {
	defHash = s.DefinitionHash
	if defHash == "" {
		defHash = definitionHash(s.Definition)
	}
	pos := s
	pos.History, pos.Definition, pos.DefinitionHash = nil, nil, defHash
	if b, err = json.Marshal(pos); err != nil {
		return nil, "", false, fmt.Errorf("encode snapshot %s: %w", s.Execution.ExecutionArn, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return b, defHash, !p.defs[defHash] && len(s.Definition) > 0, nil
}

// appendHistory appends the JSON of each of evs, arn's history events, to
// args.
func appendHistory(args []any, arn string, evs []HistoryEvent) ([]any, error) {
	for _, ev := range evs {
		eb, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("encode history of %s: %w", arn, err)
		}
		args = append(args, eb)
	}
	return args, nil
}

// stored notes what a successful write stored: arn's first n history
// events (when the execution still runs: an ended one is not written
// again) and, when sent, the definition of defHash.
func (p *RedisPersister) stored(arn string, n int, running bool, defHash string, sentDef bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if running {
		if p.saved == nil {
			p.saved = map[string]int{}
		}
		p.saved[arn] = n
	}
	if sentDef {
		if p.defs == nil {
			p.defs = map[string]bool{}
		}
		p.defs[defHash] = true
	}
}

// claimScript stores a new execution's first snapshot unless its
// position key exists. KEYS exec, hist, execs, def; ARGV the position,
// the definition ("" when this process stored it already), the ARN, then
// the history events.
var claimScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then redis.call('SET', KEYS[4], ARGV[2], 'NX') end
redis.call('DEL', KEYS[2])
if #ARGV > 3 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 4)) end
redis.call('SADD', KEYS[3], ARGV[3])
return 1
`)

// Claim stores s, a new execution's first snapshot, in one round trip,
// unless an execution of its ARN is stored (running, or ended within the
// retention): then it stores nothing and returns false.
func (p *RedisPersister) Claim(ctx context.Context, s Snapshot) (bool, error) {
	arn := s.Execution.ExecutionArn
	b, defHash, sendDef, err := p.position(s)
	if err != nil {
		return false, err
	}
	def := ""
	if sendDef {
		def = string(s.Definition)
	}
	args, err := appendHistory(append(make([]any, 0, 3+len(s.History)), b, def, arn), arn, s.History)
	if err != nil {
		return false, err
	}
	keys := []string{p.prefix() + "exec:" + arn, p.prefix() + "hist:" + arn, p.prefix() + "execs", p.prefix() + "def:" + defHash}
	n, err := claimScript.Run(ctx, p.Client, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("claim execution %s: %w", arn, err)
	}
	if n != 1 {
		return false, nil
	}
	p.stored(arn, len(s.History), true, defHash, sendDef)
	return true, nil
}

// Load reads one execution, running or ended (without its definition).
func (p *RedisPersister) Load(ctx context.Context, execArn string) (Snapshot, error) {
	s, _, ok, err := p.read(ctx, execArn)
	if err != nil {
		return Snapshot{}, err
	}
	if !ok {
		return Snapshot{}, apiErr(ErrExecutionDoesNotExist, "execution %s", execArn)
	}
	return s, nil
}

// read returns the snapshot of arn and how many history events its list
// holds (none for a snapshot written whole by an older version).
func (p *RedisPersister) read(ctx context.Context, arn string) (s Snapshot, listed int, ok bool, err error) {
	var exec *redis.StringCmd
	var hist *redis.StringSliceCmd
	_, err = p.Client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		exec = pipe.Get(ctx, p.prefix()+"exec:"+arn)
		hist = pipe.LRange(ctx, p.prefix()+"hist:"+arn, 0, -1)
		return nil
	})
	if errors.Is(exec.Err(), redis.Nil) {
		return Snapshot{}, 0, false, nil
	}
	if err != nil {
		return Snapshot{}, 0, false, fmt.Errorf("read snapshot %s: %w", arn, err)
	}
	if err := json.Unmarshal([]byte(exec.Val()), &s); err != nil {
		return Snapshot{}, 0, false, fmt.Errorf("decode snapshot %s: %w", arn, err)
	}
	events := hist.Val()
	if len(events) > 0 {
		s.History = make([]HistoryEvent, len(events))
		for i, ev := range events {
			if err := json.Unmarshal([]byte(ev), &s.History[i]); err != nil {
				return Snapshot{}, 0, false, fmt.Errorf("decode history of %s: %w", arn, err)
			}
		}
	}
	return s, len(events), true, nil
}

// LoadAll reads every running execution with its history and definition.
// (A snapshot written whole, by an older version, is read as it is.) A
// definition no longer stored is left empty: Resume then runs the state
// machine created under that ARN, if any.
func (p *RedisPersister) LoadAll(ctx context.Context) ([]Snapshot, error) {
	arns, err := p.Client.SMembers(ctx, p.prefix()+"execs").Result()
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	defs := map[string][]byte{}
	var out []Snapshot
	for _, arn := range arns {
		s, listed, ok, err := p.read(ctx, arn)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if len(s.Definition) == 0 && s.DefinitionHash != "" {
			def, ok := defs[s.DefinitionHash]
			if !ok {
				def, err = p.Client.Get(ctx, p.prefix()+"def:"+s.DefinitionHash).Bytes()
				if err != nil && !errors.Is(err, redis.Nil) {
					return nil, fmt.Errorf("read definition of %s: %w", arn, err)
				}
				defs[s.DefinitionHash] = def
			}
			s.Definition = def
		}
		if listed > 0 {
			p.mu.Lock()
			if p.saved == nil {
				p.saved = map[string]int{}
			}
			p.saved[arn] = listed
			p.mu.Unlock()
		}
		out = append(out, s)
	}
	return out, nil
}

// definitionHash names a definition in the store.
func definitionHash(def []byte) string {
	sum := sha256.Sum256(def)
	return hex.EncodeToString(sum[:16])
}
