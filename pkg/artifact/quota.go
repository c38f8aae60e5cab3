package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// ErrTooLarge is returned for one file over a size limit: a store's own
// bound of one object, or the bound a caller sets with LimitReader.
var ErrTooLarge = errors.New("artifact: file too large")

// ErrQuotaExceeded is returned by a Quota store's Put when the file does not
// fit in what is left of its conversation's storage quota. The error is a
// *QuotaError carrying the numbers.
var ErrQuotaExceeded = errors.New("artifact: conversation storage quota exceeded")

// QuotaError says by how much a conversation's quota was missed.
type QuotaError struct {
	Limit int64 // the quota, in bytes
	Used  int64 // bytes stored before this file
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("the conversation's storage quota of %s would be exceeded (%s stored, %s left)",
		FormatBytes(e.Limit), FormatBytes(e.Used), FormatBytes(max(e.Limit-e.Used, 0)))
}

func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// Usage keeps each conversation's stored bytes, per object, where every
// process of the deployment sees them (Valkey: pkg/record/valkey.Usage).
type Usage interface {
	// Used is the bytes cid stores.
	Used(ctx context.Context, cid string) (int64, error)
	// Reserve counts n bytes of object id against cid if the total stays
	// within limit, in one atomic step; it returns false and changes
	// nothing when it would not.
	Reserve(ctx context.Context, cid, id string, n, limit int64) (bool, error)
	// Release stops counting object id (nothing when it was not counted).
	Release(ctx context.Context, cid, id string) error
	// Reset forgets cid.
	Reset(ctx context.Context, cid string) error
}

// Quota is a Store that bounds the bytes each conversation stores. A Put
// of a stream reads at most what is left of the quota (one byte more fails
// it and the inner store keeps nothing), then reserves the stored size
// atomically; a Put of known length only reserves after the write: of
// two concurrent Puts that would together exceed the quota, one fails and
// its object is deleted. Deleting an object or a conversation releases its
// bytes.
type Quota struct {
	Store
	Usage Usage
	// Limit is the quota per conversation, in bytes (> 0).
	Limit int64
}

// WithQuota bounds s to limit bytes per conversation, counted in u; a
// limit <= 0 returns s unchanged.
func WithQuota(s Store, u Usage, limit int64) Store {
	if limit <= 0 || u == nil {
		return s
	}
	return &Quota{Store: s, Usage: u, Limit: limit}
}

// Room is how many more bytes cid may store.
func (q *Quota) Room(ctx context.Context, cid string) (int64, error) {
	used, err := q.Usage.Used(ctx, cid)
	if err != nil {
		return 0, fmt.Errorf("read storage use of %s: %w", cid, err)
	}
	return max(q.Limit-used, 0), nil
}

// Put stores body if it fits in cid's quota; ErrQuotaExceeded (a
// *QuotaError) otherwise, with nothing kept.
//
// A body whose length is known before it is read (an inline file: a
// bytes.Reader, say) needs no read of the room first: the reservation
// after the write decides, atomically, as it does for a stream, so such a
// Put costs one round trip to the count, not two. With a context of
// DeferReservations the reservation is left to the caller (Deferred).
func (q *Quota) Put(ctx context.Context, cid, id, mimeType string, body io.Reader) (int64, error) {
	var n int64
	if size, ok := knownLength(body); ok {
		if size > q.Limit {
			return 0, q.exceeded(ctx, cid)
		}
		var err error
		if n, err = q.Store.Put(ctx, cid, id, mimeType, body); err != nil {
			return 0, err
		}
	} else {
		used, err := q.Usage.Used(ctx, cid)
		if err != nil {
			return 0, fmt.Errorf("read storage use of %s: %w", cid, err)
		}
		full := &QuotaError{Limit: q.Limit, Used: used}
		room := q.Limit - used
		if room <= 0 {
			return 0, full
		}
		if n, err = q.Store.Put(ctx, cid, id, mimeType, LimitReader(body, room, full)); err != nil {
			return 0, err
		}
	}
	if d, ok := ctx.Value(deferredKey{}).(*Deferred); ok && d != nil {
		d.add(q, cid, id, n)
		return n, nil
	}
	ok, err := q.Usage.Reserve(ctx, cid, id, n, q.Limit)
	if err == nil && ok {
		return n, nil
	}
	// Another Put took the room meanwhile, or the count could not be
	// written: the object must not stay uncounted.
	if derr := q.Store.Delete(context.WithoutCancel(ctx), cid, id); derr != nil {
		err = errors.Join(err, derr)
	}
	if err != nil {
		return 0, fmt.Errorf("count storage use of %s: %w", cid, err)
	}
	return 0, q.exceeded(ctx, cid)
}

// Reservation is the count of one stored object against its
// conversation's quota, not yet made (Deferred).
type Reservation struct {
	ID    string
	Bytes int64
	Limit int64 // the conversation's quota
}

// Deferred holds the reservations a Quota store did not make: a Put with
// a context of DeferReservations stores the file and leaves its
// reservation here, for the caller to make atomically with the write that
// records the file (a call's outcome: one round trip less per returned
// file). What it cannot make, Discard deletes.
type Deferred struct {
	mu   sync.Mutex
	puts []deferredPut
}

// deferredPut is one stored object whose reservation was left.
type deferredPut struct {
	Reservation
	q   *Quota
	cid string
}

type deferredKey struct{}

// DeferReservations returns ctx, whose Quota Puts leave their
// reservations in the returned Deferred.
func DeferReservations(ctx context.Context) (context.Context, *Deferred) {
	d := &Deferred{}
	return context.WithValue(ctx, deferredKey{}, d), d
}

func (d *Deferred) add(q *Quota, cid, id string, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.puts = append(d.puts, deferredPut{Reservation{ID: id, Bytes: n, Limit: q.Limit}, q, cid})
}

// Reservations are the reservations left so far, in the order of their Puts.
func (d *Deferred) Reservations() []Reservation {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Reservation, len(d.puts))
	for i, p := range d.puts {
		out[i] = p.Reservation
	}
	return out
}

// Discard deletes every object whose reservation was left here: the
// reservations could not be made, so the objects must not stay.
func (d *Deferred) Discard(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	puts := slices.Clone(d.puts)
	d.mu.Unlock()
	var errs []error
	for _, p := range puts {
		if err := p.q.Store.Delete(context.WithoutCancel(ctx), p.cid, p.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// exceeded is the QuotaError of cid as its use stands now.
func (q *Quota) exceeded(ctx context.Context, cid string) error {
	used, _ := q.Usage.Used(ctx, cid)
	return &QuotaError{Limit: q.Limit, Used: used}
}

// Delete removes the object and releases its bytes.
func (q *Quota) Delete(ctx context.Context, cid, id string) error {
	if err := q.Store.Delete(ctx, cid, id); err != nil {
		return err
	}
	return q.Usage.Release(ctx, cid, id)
}

// DeleteConversation removes cid's objects and forgets its use.
func (q *Quota) DeleteConversation(ctx context.Context, cid string) error {
	if err := q.Store.DeleteConversation(ctx, cid); err != nil {
		return err
	}
	return q.Usage.Reset(ctx, cid)
}

// Room is how many more bytes s lets conversation cid store, and whether s
// bounds it at all (a Quota store, or a store wrapping one).
func Room(ctx context.Context, s Store, cid string) (int64, bool, error) {
	r, ok := s.(interface {
		Room(ctx context.Context, cid string) (int64, error)
	})
	if !ok {
		return 0, false, nil
	}
	n, err := r.Room(ctx, cid)
	return n, true, err
}

// LimitReader reads r until n bytes, then fails with err (ErrTooLarge when
// nil) as soon as one byte more arrives, so a store's Put fails and keeps
// nothing rather than storing a cut file as if it were whole.
//
// A reader that says its length (Len, as bytes.Reader does) and is within
// n comes back as it is: it cannot go past n, and the length stays known
// to the store (Quota.Put reserves such a file without reading the room).
func LimitReader(r io.Reader, n int64, err error) io.Reader {
	if size, ok := knownLength(r); ok && size <= n {
		return r
	}
	if err == nil {
		err = ErrTooLarge
	}
	return &limitReader{r: r, left: n, err: err}
}

type limitReader struct {
	r    io.Reader
	left int64
	err  error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, l.err
	}
	// Read one byte past the limit to tell a file that ends exactly at it
	// from one that goes on.
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n - 1, l.err
	}
	return n, err
}

// FormatBytes writes n for a person: "512 MiB", "1.5 GiB", "300 bytes".
func FormatBytes(n int64) string {
	const k = 1024
	switch {
	case n >= k*k*k:
		return trimUnit(float64(n)/(k*k*k), "GiB")
	case n >= k*k:
		return trimUnit(float64(n)/(k*k), "MiB")
	case n >= k:
		return trimUnit(float64(n)/k, "KiB")
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimUnit(v float64, unit string) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), unit)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// knownLength is how many bytes r has left when it says so (Len, as
// bytes.Reader and strings.Reader do).
func knownLength(r io.Reader) (int64, bool) {
	if sized, ok := r.(interface{ Len() int }); ok {
		return int64(sized.Len()), true
	}
	return 0, false
}
