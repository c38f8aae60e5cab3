package demoagents

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ledger records publications. It is safe for concurrent use. A call id
// is published at most once: a retried call gets the earlier publication
// back. Where "once" holds depends on the storage: one process for the
// memory and file ledgers, every process sharing the Valkey for the Redis
// ledger.
type Ledger struct {
	store ledgerStore
}

// ledgerStore is where a Ledger keeps its publications.
type ledgerStore interface {
	// record stores p unless its call id was recorded before, in which case
	// it returns the earlier publication and errAlreadyPublished.
	record(ctx context.Context, p Publication) (Publication, error)
	// list returns all publications in the order they were made.
	list(ctx context.Context) ([]Publication, error)
	close() error
}

// errAlreadyPublished marks a retried call id.
var errAlreadyPublished = errors.New("already published")

// ledgerTimeout bounds one ledger call against Valkey.
const ledgerTimeout = 3 * time.Second

// NewMemoryLedger returns an empty in-memory Ledger.
func NewMemoryLedger() *Ledger { return &Ledger{store: &memLedger{}} }

// NewLedger returns a Ledger backed by the JSONL file at path: existing
// lines are loaded, new publications appended. The caller closes it.
func NewLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	l := &memLedger{file: f}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var p Publication
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			f.Close()
			return nil, fmt.Errorf("read ledger %s: %w", path, err)
		}
		l.pubs = append(l.pubs, p)
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, fmt.Errorf("read ledger %s: %w", path, err)
	}
	return &Ledger{store: l}, nil
}

// DefaultLedgerKey is the Valkey hash of NewRedisLedger.
const DefaultLedgerKey = "demoagents:publications"

// NewRedisLedger returns a Ledger in the Valkey hash DefaultLedgerKey
// (field: call id, value: the publication's JSON), written with HSETNX so
// that a call id publishes once across all instances. Publications do not
// expire: they record irreversible effects.
func NewRedisLedger(rdb redis.UniversalClient) *Ledger {
	return &Ledger{store: &redisLedger{rdb: rdb, key: DefaultLedgerKey}}
}

// Close closes the ledger's file, if any; it does not close a Valkey client.
func (l *Ledger) Close() error { return l.store.close() }

func (l *Ledger) record(ctx context.Context, p Publication) (Publication, error) {
	return l.store.record(ctx, p)
}

// ListContext returns all publications in the order they were made.
func (l *Ledger) ListContext(ctx context.Context) ([]Publication, error) {
	return l.store.list(ctx)
}

// List returns a copy of all publications in the order they were made.
// A storage error is logged and yields an empty list; use ListContext to
// see it.
func (l *Ledger) List() []Publication {
	ps, err := l.store.list(context.Background())
	if err != nil {
		slog.Warn("list publications", "error", err.Error())
		return []Publication{}
	}
	return ps
}

// Len returns how many publications were made.
func (l *Ledger) Len() int { return len(l.List()) }

// memLedger keeps publications in memory, optionally appending them to a
// JSONL file.
type memLedger struct {
	mu   sync.Mutex
	pubs []Publication
	file *os.File
}

func (l *memLedger) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}

func (l *memLedger) record(_ context.Context, p Publication) (Publication, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.CallID != "" {
		for _, old := range l.pubs {
			if old.CallID == p.CallID {
				return old, errAlreadyPublished
			}
		}
	}
	if l.file != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return p, fmt.Errorf("encode publication: %w", err)
		}
		if _, err := l.file.Write(append(b, '\n')); err != nil {
			return p, fmt.Errorf("append publication: %w", err)
		}
	}
	l.pubs = append(l.pubs, p)
	return p, nil
}

func (l *memLedger) list(context.Context) ([]Publication, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Publication{}, l.pubs...), nil
}

// redisLedger keeps publications in one Valkey hash keyed by call id.
type redisLedger struct {
	rdb redis.UniversalClient
	key string
}

func (l *redisLedger) close() error { return nil }

func (l *redisLedger) record(ctx context.Context, p Publication) (Publication, error) {
	field := p.CallID
	if field == "" {
		// No call id, nothing to deduplicate: a field of its own.
		field = "publication:" + p.ID
	}
	b, err := json.Marshal(p)
	if err != nil {
		return p, fmt.Errorf("encode publication: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	set, err := l.rdb.HSetNX(ctx, l.key, field, b).Result()
	if err != nil {
		return p, fmt.Errorf("record publication of call %s: %w", p.CallID, err)
	}
	if set {
		return p, nil
	}
	old, err := l.rdb.HGet(ctx, l.key, field).Bytes()
	if err != nil {
		return p, fmt.Errorf("read publication of call %s: %w", p.CallID, err)
	}
	var prev Publication
	if err := json.Unmarshal(old, &prev); err != nil {
		return p, fmt.Errorf("decode publication of call %s: %w", p.CallID, err)
	}
	return prev, errAlreadyPublished
}

func (l *redisLedger) list(ctx context.Context) ([]Publication, error) {
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	m, err := l.rdb.HGetAll(ctx, l.key).Result()
	if err != nil {
		return nil, fmt.Errorf("list publications: %w", err)
	}
	out := make([]Publication, 0, len(m))
	for field, v := range m {
		var p Publication
		if err := json.Unmarshal([]byte(v), &p); err != nil {
			return nil, fmt.Errorf("decode publication %s: %w", field, err)
		}
		out = append(out, p)
	}
	// A hash has no order; publications are listed by when they were made.
	slices.SortFunc(out, func(a, b Publication) int {
		return cmp.Or(a.PublishedAt.Compare(b.PublishedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}
