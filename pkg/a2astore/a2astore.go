// Package a2astore keeps a2a-go tasks in Valkey (go-redis v9), so that an
// A2A server running as several instances (Lambda) finds a task that
// another instance created: an input-required task continued with the same
// task id may land anywhere. It implements a2asrv.TaskStore and nothing
// else; it must not interpret a task beyond its id and state.
//
// Each task is one hash, a2atask:{<taskId>}, holding the task's JSON and
// its state, with a TTL so that finished tasks do not pile up. The hash tag
// keeps everything of one task in one cluster slot.
//
// a2asrv.TaskStore (a2a-go v0.3.3) has no version or conflict contract:
// Save is last-writer-wins. Within one process a2a-go already runs one
// execution per task at a time; across instances this store guards the one
// invariant that matters: a task that reached a terminal state is final,
// so a Save that would move it to another state fails with ErrTaskFinal
// (a late instance cannot turn "completed" back into "working").
//
// Artifact bytes stay in the stored task: tasks/get (which callers poll)
// must return the task with its artifacts, and the interface gives no way
// to know which reads need them. The TTL (TerminalTTL for finished tasks)
// bounds how long they are kept.
package a2astore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/redis/go-redis/v9"
)

// Defaults of Options.
const (
	DefaultTTL     = 24 * time.Hour
	DefaultPrefix  = "a2atask:"
	DefaultTimeout = 3 * time.Second
)

// ErrTaskFinal is returned by Save when the stored task is in a terminal
// state and the saved one is in a different state.
var ErrTaskFinal = errors.New("task already reached a terminal state")

// Options configures a TaskStore. Zero values take the defaults.
type Options struct {
	// TTL is how long a task that is not finished (submitted, working,
	// input-required) is kept after its last save. Default DefaultTTL.
	TTL time.Duration
	// TerminalTTL is how long a finished task (completed, failed,
	// canceled, rejected) is kept after its last save; shorter values free
	// artifact bytes sooner. Default: TTL.
	TerminalTTL time.Duration
	// Prefix starts every key. Default DefaultPrefix.
	Prefix string
	// Timeout bounds each Valkey call when the caller's context has a
	// later deadline or none. Default DefaultTimeout.
	Timeout time.Duration
}

// TaskStore is an a2asrv.TaskStore in Valkey. It is safe for concurrent
// use by many goroutines and processes.
type TaskStore struct {
	rdb  redis.UniversalClient
	opts Options
}

var _ a2asrv.TaskStore = (*TaskStore)(nil)

// New returns a TaskStore on rdb.
func New(rdb redis.UniversalClient, opts Options) *TaskStore {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.TerminalTTL <= 0 {
		opts.TerminalTTL = opts.TTL
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &TaskStore{rdb: rdb, opts: opts}
}

// Key returns the Valkey key of the task id.
func (s *TaskStore) Key(id a2a.TaskID) string {
	return s.opts.Prefix + "{" + string(id) + "}"
}

// saveScript writes the task unless the stored one is final in another
// state. KEYS[1] the task hash; ARGV: task JSON, state, "1" if terminal,
// TTL in milliseconds.
var saveScript = redis.NewScript(`
local final = redis.call('HGET', KEYS[1], 'final')
if final == '1' then
  local state = redis.call('HGET', KEYS[1], 'state')
  if state ~= ARGV[2] then
    return redis.error_reply('TASKFINAL ' .. tostring(state))
  end
end
redis.call('HSET', KEYS[1], 'task', ARGV[1], 'state', ARGV[2], 'final', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// Save stores task, replacing the stored version, and restarts its TTL.
// It fails with ErrTaskFinal when the stored task is in a terminal state
// other than task's.
func (s *TaskStore) Save(ctx context.Context, task *a2a.Task) error {
	if task == nil || task.ID == "" {
		return fmt.Errorf("save task: %w", a2a.ErrInvalidParams)
	}
	b, err := json.Marshal(task)
	if err != nil {
		return fmt.Errorf("save task %s: encode: %w", task.ID, err)
	}
	final, ttl := "0", s.opts.TTL
	if task.Status.State.Terminal() {
		final, ttl = "1", s.opts.TerminalTTL
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	err = saveScript.Run(ctx, s.rdb, []string{s.Key(task.ID)},
		string(b), string(task.Status.State), final, ttl.Milliseconds()).Err()
	if err != nil {
		if strings.HasPrefix(err.Error(), "TASKFINAL") {
			stored := strings.TrimSpace(strings.TrimPrefix(err.Error(), "TASKFINAL"))
			return fmt.Errorf("save task %s as %s: stored state %s: %w", task.ID, task.Status.State, stored, ErrTaskFinal)
		}
		return fmt.Errorf("save task %s: %w", task.ID, err)
	}
	return nil
}

// Get returns the stored task, or an error wrapping a2a.ErrTaskNotFound
// when there is none (never saved, or expired).
func (s *TaskStore) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	b, err := s.rdb.HGet(ctx, s.Key(id), "task").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("get task %s: %w", id, a2a.ErrTaskNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	var t a2a.Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("get task %s: decode: %w", id, err)
	}
	return &t, nil
}
