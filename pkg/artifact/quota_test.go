package artifact_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/localstore"
)

// countingUsage is an in-memory artifact.Usage that counts its reads.
type countingUsage struct {
	mu    sync.Mutex
	bytes map[string]int64 // object id → size
	reads int
}

func (u *countingUsage) Used(context.Context, string) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reads++
	var n int64
	for _, b := range u.bytes {
		n += b
	}
	return n, nil
}

func (u *countingUsage) Reserve(_ context.Context, _, id string, n, limit int64) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var used int64
	for k, b := range u.bytes {
		if k != id {
			used += b
		}
	}
	if used+n > limit {
		return false, nil
	}
	u.bytes[id] = n
	return true, nil
}

func (u *countingUsage) Release(_ context.Context, _, id string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.bytes, id)
	return nil
}

func (u *countingUsage) Reset(context.Context, string) error { return nil }

// A file whose length is known (an inline file a specialist returned) is
// counted with one reservation and no read of the room first; a stream's
// room is read first. Either way what does not fit is refused and not kept.
func TestQuotaPutOfKnownLength(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	local, err := localstore.New(t.TempDir(), "http://x", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	u := &countingUsage{bytes: map[string]int64{}}
	q := artifact.WithQuota(local, u, 100)

	// As the A2A invoker sends an inline file: under a per-file limit.
	inline := artifact.LimitReader(bytes.NewReader(make([]byte, 60)), 1<<20, nil)
	if n, err := q.Put(ctx, "c1", "a1", "text/plain", inline); err != nil || n != 60 {
		t.Fatalf("Put of 60 known bytes = %d, %v", n, err)
	}
	if u.reads != 0 {
		t.Errorf("a Put of known length read the use %d times, want 0", u.reads)
	}
	if _, err := q.Put(ctx, "c1", "a2", "text/plain", struct{ io.Reader }{bytes.NewReader(make([]byte, 10))}); err != nil {
		t.Fatal(err)
	}
	if u.reads != 1 {
		t.Errorf("a Put of a stream read the use %d times, want 1", u.reads)
	}
	for name, body := range map[string]io.Reader{
		"over the room":  bytes.NewReader(make([]byte, 40)),
		"over the limit": bytes.NewReader(make([]byte, 101)),
		"a stream over":  struct{ io.Reader }{bytes.NewReader(make([]byte, 40))},
	} {
		var qe *artifact.QuotaError
		if _, err := q.Put(ctx, "c1", "a3", "text/plain", body); !errors.As(err, &qe) || qe.Used != 70 || qe.Limit != 100 {
			t.Errorf("Put %s = %v, want a QuotaError with 70 of 100 used", name, err)
		}
		if rc, _, err := local.Get(ctx, "c1", "a3"); err == nil {
			rc.Close()
			t.Errorf("Put %s: the refused file was kept", name)
		}
	}
}

// A Put with a context of DeferReservations stores the file and leaves
// its count to the caller: nothing is reserved, the reservation says what
// to count, and Discard deletes what was stored.
func TestQuotaPutDefersItsReservation(t *testing.T) {
	t.Parallel()
	local, err := localstore.New(t.TempDir(), "http://x", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	u := &countingUsage{bytes: map[string]int64{}}
	q := artifact.WithQuota(local, u, 100)
	ctx, d := artifact.DeferReservations(t.Context())
	if n, err := q.Put(ctx, "c1", "a1", "text/plain", bytes.NewReader(make([]byte, 60))); err != nil || n != 60 {
		t.Fatalf("Put = %d, %v", n, err)
	}
	if n, err := q.Put(ctx, "c1", "a2", "text/plain", struct{ io.Reader }{bytes.NewReader(make([]byte, 30))}); err != nil || n != 30 {
		t.Fatalf("Put of a stream = %d, %v", n, err)
	}
	if len(u.bytes) != 0 {
		t.Errorf("deferred Puts reserved %v, want nothing", u.bytes)
	}
	want := []artifact.Reservation{{ID: "a1", Bytes: 60, Limit: 100}, {ID: "a2", Bytes: 30, Limit: 100}}
	if got := d.Reservations(); !slices.Equal(got, want) {
		t.Errorf("Reservations() = %v, want %v", got, want)
	}
	// A file over what a single Put may store is still refused at once.
	if _, err := q.Put(ctx, "c1", "a3", "text/plain", bytes.NewReader(make([]byte, 101))); !errors.Is(err, artifact.ErrQuotaExceeded) {
		t.Errorf("deferred Put over the quota = %v, want ErrQuotaExceeded", err)
	}
	if err := d.Discard(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a1", "a2"} {
		if rc, _, err := local.Get(t.Context(), "c1", id); err == nil {
			rc.Close()
			t.Errorf("%s is still stored after Discard", id)
		}
	}
}
