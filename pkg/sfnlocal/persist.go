package sfnlocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Snapshot is the persisted state of a running execution, written at every
// top-level state transition and when a top-level task starts waiting on a
// token. It holds references-sized data only: the execution, the position
// (state name + its input + variables), the history and the open token.
type Snapshot struct {
	Execution        Execution       `json:"execution"`
	StateMachineName string          `json:"stateMachineName"`
	Definition       json.RawMessage `json:"definition,omitempty"`
	// DefinitionHash names the definition stored apart (RedisPersister).
	DefinitionHash string          `json:"definitionHash,omitempty"`
	State          string          `json:"state"`
	StateInput     json.RawMessage `json:"stateInput"`
	Variables      map[string]any  `json:"variables"`
	History        []HistoryEvent  `json:"history"`
	Wait           *persistedWait  `json:"wait,omitempty"`
}

// Persister stores snapshots of running executions.
type Persister interface {
	// Save stores s, replacing the snapshot of the same execution.
	Save(ctx context.Context, s Snapshot) error
	// LoadAll returns every stored snapshot.
	LoadAll(ctx context.Context) ([]Snapshot, error)
	// Delete drops the snapshot of execArn; a missing one is no error.
	Delete(ctx context.Context, execArn string) error
}

func (x *execution) snapshot(c *cursor) (Snapshot, error) {
	in, err := json.Marshal(c.input)
	if err != nil {
		return Snapshot{}, fmt.Errorf("encode state input: %w", err)
	}
	vars := make(map[string]any, len(c.vars))
	for k, v := range c.vars {
		vars[k] = v
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return Snapshot{
		Execution: x.meta, StateMachineName: x.sm.name, Definition: x.sm.definition,
		State: c.state, StateInput: in, Variables: vars,
		History: append([]HistoryEvent(nil), x.history...), Wait: c.wait,
	}, nil
}

// Resume loads the persisted executions and runs them again. One that was
// waiting on a task token waits again on the same token (its TimeoutSeconds
// deadline kept, its heartbeat timer restarted). One that was inside a task
// runs that task again: delivery is at-least-once, as Lambda retries are.
// A Map in flight restarts from the Map state's input. State machines that
// are not created yet are created from the snapshot's definition.
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
		smArn, err := e.CreateStateMachine(s.StateMachineName, s.Definition)
		if err != nil && !errors.Is(err, ErrStateMachineAlreadyExists) {
			return fmt.Errorf("resume %s: %w", s.Execution.ExecutionArn, err)
		}
		if smArn == "" {
			smArn = s.Execution.StateMachineArn
		}
		e.mu.Lock()
		sm := e.machines[smArn]
		_, exists := e.execs[s.Execution.ExecutionArn]
		e.mu.Unlock()
		if exists {
			continue
		}
		g := sm.root
		if g.States[s.State] == nil {
			return fmt.Errorf("resume %s: state %q is not in state machine %s", s.Execution.ExecutionArn, s.State, smArn)
		}
		var input any
		if err := json.Unmarshal(s.StateInput, &input); err != nil {
			return fmt.Errorf("resume %s: decode state input: %w", s.Execution.ExecutionArn, err)
		}
		x := newExecution(s.Execution, sm)
		x.history = s.History
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
		e.launch(x, &cursor{state: s.State, input: input, vars: vars, wait: s.Wait})
	}
	return nil
}

// FilePersister keeps one JSON file per execution in Dir.
type FilePersister struct {
	Dir string
}

var _ Persister = (*FilePersister)(nil)

func (p *FilePersister) path(execArn string) string {
	h := sha256.Sum256([]byte(execArn))
	return filepath.Join(p.Dir, hex.EncodeToString(h[:16])+".json")
}

// Save writes the snapshot atomically (temp file + rename).
func (p *FilePersister) Save(_ context.Context, s Snapshot) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode snapshot %s: %w", s.Execution.ExecutionArn, err)
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", p.Dir, err)
	}
	f, err := os.CreateTemp(p.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("save snapshot %s: %w", s.Execution.ExecutionArn, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("save snapshot %s: %w", s.Execution.ExecutionArn, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("save snapshot %s: %w", s.Execution.ExecutionArn, err)
	}
	if err := os.Rename(f.Name(), p.path(s.Execution.ExecutionArn)); err != nil {
		return fmt.Errorf("save snapshot %s: %w", s.Execution.ExecutionArn, err)
	}
	return nil
}

// LoadAll reads every snapshot file of Dir; a missing Dir holds none.
func (p *FilePersister) LoadAll(_ context.Context) ([]Snapshot, error) {
	entries, err := os.ReadDir(p.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p.Dir, err)
	}
	var out []Snapshot
	for _, en := range entries {
		if en.IsDir() || !strings.HasSuffix(en.Name(), ".json") || strings.HasPrefix(en.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.Dir, en.Name()))
		if err != nil {
			return nil, fmt.Errorf("read snapshot %s: %w", en.Name(), err)
		}
		var s Snapshot
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("decode snapshot %s: %w", en.Name(), err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Delete removes the execution's file.
func (p *FilePersister) Delete(_ context.Context, execArn string) error {
	err := os.Remove(p.path(execArn))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete snapshot %s: %w", execArn, err)
	}
	return nil
}

// RedisPersister keeps snapshots in Valkey/Redis, written incrementally so
// a transition costs what it adds, not the whole execution again: the
// position (state, input, variables, token) under Prefix+"exec:"+arn, the
// history as a list Prefix+"hist:"+arn that each save appends the new
// events to, the definition once under Prefix+"def:"+its hash, and a set
// Prefix+"execs" of the ARNs. Prefix defaults to "sfnlocal:".
type RedisPersister struct {
	Client redis.UniversalClient
	Prefix string

	mu    sync.Mutex
	saved map[string]int // arn → history events stored by this process
}

var _ Persister = (*RedisPersister)(nil)

func (p *RedisPersister) prefix() string {
	if p.Prefix == "" {
		return "sfnlocal:"
	}
	return p.Prefix
}

// Save stores the position, appends the history events not stored yet and
// indexes the ARN, in one MULTI/EXEC. The first save of an execution in
// this process rewrites its whole history.
func (p *RedisPersister) Save(ctx context.Context, s Snapshot) error {
	arn := s.Execution.ExecutionArn
	sum := sha256.Sum256(s.Definition)
	defHash := hex.EncodeToString(sum[:16])
	pos := s
	pos.History, pos.Definition, pos.DefinitionHash = nil, nil, defHash
	b, err := json.Marshal(pos)
	if err != nil {
		return fmt.Errorf("encode snapshot %s: %w", arn, err)
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
	events := make([]any, 0, len(s.History)-from)
	for _, ev := range s.History[from:] {
		eb, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode history of %s: %w", arn, err)
		}
		events = append(events, eb)
	}
	hk := p.prefix() + "hist:" + arn
	_, err = p.Client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, p.prefix()+"exec:"+arn, b, 0)
		pipe.SetNX(ctx, p.prefix()+"def:"+defHash, []byte(s.Definition), 0)
		if !known {
			pipe.Del(ctx, hk)
		}
		if len(events) > 0 {
			pipe.RPush(ctx, hk, events...)
		}
		pipe.SAdd(ctx, p.prefix()+"execs", arn)
		return nil
	})
	if err != nil {
		// What was stored is unknown now: the next save rewrites it all.
		p.forget(arn)
		return fmt.Errorf("save snapshot %s: %w", arn, err)
	}
	p.remember(arn, len(s.History))
	return nil
}

func (p *RedisPersister) remember(arn string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.saved == nil {
		p.saved = map[string]int{}
	}
	p.saved[arn] = n
}

func (p *RedisPersister) forget(arn string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.saved, arn)
}

// LoadAll reads every indexed snapshot with its history and definition.
// (A snapshot written whole, by an older version, is read as it is.)
func (p *RedisPersister) LoadAll(ctx context.Context) ([]Snapshot, error) {
	arns, err := p.Client.SMembers(ctx, p.prefix()+"execs").Result()
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []Snapshot
	for _, arn := range arns {
		var exec *redis.StringCmd
		var hist *redis.StringSliceCmd
		_, err := p.Client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			exec = pipe.Get(ctx, p.prefix()+"exec:"+arn)
			hist = pipe.LRange(ctx, p.prefix()+"hist:"+arn, 0, -1)
			return nil
		})
		if errors.Is(err, redis.Nil) && errors.Is(exec.Err(), redis.Nil) {
			continue
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read snapshot %s: %w", arn, err)
		}
		var s Snapshot
		if err := json.Unmarshal([]byte(exec.Val()), &s); err != nil {
			return nil, fmt.Errorf("decode snapshot %s: %w", arn, err)
		}
		if len(s.Definition) == 0 {
			def, err := p.Client.Get(ctx, p.prefix()+"def:"+s.DefinitionHash).Bytes()
			if err != nil {
				return nil, fmt.Errorf("read definition of %s: %w", arn, err)
			}
			s.Definition = def
		}
		if events := hist.Val(); len(events) > 0 {
			s.History = make([]HistoryEvent, len(events))
			for i, ev := range events {
				if err := json.Unmarshal([]byte(ev), &s.History[i]); err != nil {
					return nil, fmt.Errorf("decode history of %s: %w", arn, err)
				}
			}
			p.remember(arn, len(events))
		}
		out = append(out, s)
	}
	return out, nil
}

// Delete drops the snapshot, its history and its index entry.
func (p *RedisPersister) Delete(ctx context.Context, execArn string) error {
	_, err := p.Client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, p.prefix()+"exec:"+execArn, p.prefix()+"hist:"+execArn)
		pipe.SRem(ctx, p.prefix()+"execs", execArn)
		return nil
	})
	p.forget(execArn)
	if err != nil {
		return fmt.Errorf("delete snapshot %s: %w", execArn, err)
	}
	return nil
}
