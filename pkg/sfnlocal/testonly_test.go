package sfnlocal

// What only the tests use: a clock they advance, a persister of plain
// files, the expressions of a template.

import (
	"cmp"
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
	"time"
)

// FakeClock is a manually advanced Clock for tests. Timers fire when Advance
// moves the time to or past their deadline.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{}
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer registers a timer that fires when the fake time reaches now+d.
func (f *FakeClock) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clock: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	f.notifyLocked()
	return t
}

// Advance moves the fake time forward by d and fires every timer that is due.
func (f *FakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			t.c <- f.now
			continue
		}
		kept = append(kept, t)
	}
	f.timers = kept
	f.notifyLocked()
}

// Timers returns how many timers are waiting to fire.
func (f *FakeClock) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until at least n timers are waiting or the deadline of
// real time d passes; it reports whether n timers were reached. Tests use it
// to know the engine is parked on a retry delay or a timeout before Advance.
func (f *FakeClock) WaitTimers(n int, d time.Duration) bool {
	deadline := time.After(d)
	for {
		f.mu.Lock()
		got, ch := len(f.timers), f.changed
		f.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

func (f *FakeClock) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	clock *FakeClock
	at    time.Time
	c     chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			f.notifyLocked()
			return true
		}
	}
	return false
}

// FilePersister keeps one JSON file per execution in Dir. The file of an
// ended execution is dropped once it is older than Retention (default
// DefaultRetention), when it is next read.
type FilePersister struct {
	Dir       string
	Retention time.Duration
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

// End writes the ended execution's file; its age counts from now.
func (p *FilePersister) End(ctx context.Context, s Snapshot) error {
	return p.Save(ctx, s)
}

// read decodes the file at path; an expired ended execution is removed
// and reported as missing (ok false).
func (p *FilePersister) read(path string) (s Snapshot, ok bool, err error) {
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("read snapshot %s: %w", filepath.Base(path), err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("read snapshot %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return Snapshot{}, false, fmt.Errorf("decode snapshot %s: %w", filepath.Base(path), err)
	}
	retention := cmp.Or(p.Retention, DefaultRetention)
	if s.Execution.Status != StatusRunning && time.Since(info.ModTime()) > retention {
		_ = os.Remove(path)
		return Snapshot{}, false, nil
	}
	return s, true, nil
}

// Load reads the execution's file.
func (p *FilePersister) Load(_ context.Context, execArn string) (Snapshot, error) {
	s, ok, err := p.read(p.path(execArn))
	if err != nil {
		return Snapshot{}, err
	}
	if !ok {
		return Snapshot{}, apiErr(ErrExecutionDoesNotExist, "execution %s", execArn)
	}
	return s, nil
}

// LoadAll reads the running executions' files of Dir (a missing Dir holds
// none), dropping expired ones on the way.
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
		s, ok, err := p.read(filepath.Join(p.Dir, en.Name()))
		if err != nil {
			return nil, err
		}
		if ok && s.Execution.Status == StatusRunning {
			out = append(out, s)
		}
	}
	return out, nil
}

// templateExprs returns every "{% expr %}" inside tmpl.
func templateExprs(tmpl any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			if e, ok := isExpr(t); ok {
				out = append(out, e)
			}
		case map[string]any:
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(tmpl)
	return out
}
