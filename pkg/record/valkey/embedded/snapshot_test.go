package embedded_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record/valkey/embedded"
)

// fill writes a key of every type the record uses, and one that expires soon.
func fill(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := t.Context()
	p := c.TxPipeline()
	p.Set(ctx, "s", "bin\x00\xffary", time.Hour)
	p.HSet(ctx, "h", "a", "1", "b", "{\"x\":2}")
	p.SAdd(ctx, "set", "m1", "m2")
	p.ZAdd(ctx, "z", redis.Z{Member: "one", Score: 1.5}, redis.Z{Member: "two", Score: -2})
	p.RPush(ctx, "l", "x", "y", "z")
	p.XAdd(ctx, &redis.XAddArgs{Stream: "st", ID: "5-1", Values: []any{"type", "turn.started", "data", "{}"}})
	p.XAdd(ctx, &redis.XAddArgs{Stream: "st", ID: "6-0", Values: []any{"type", "turn.ended"}})
	p.Set(ctx, "gone", "x", 300*time.Millisecond)
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func check(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := t.Context()
	if v := c.Get(ctx, "s").Val(); v != "bin\x00\xffary" {
		t.Errorf("s = %q", v)
	}
	if ttl := c.TTL(ctx, "s").Val(); ttl <= 50*time.Minute || ttl > time.Hour {
		t.Errorf("TTL s = %v, want about 1h", ttl)
	}
	if h := c.HGetAll(ctx, "h").Val(); h["a"] != "1" || h["b"] != "{\"x\":2}" || len(h) != 2 {
		t.Errorf("h = %v", h)
	}
	if m := c.SMembers(ctx, "set").Val(); len(m) != 2 {
		t.Errorf("set = %v", m)
	}
	if z := c.ZRangeWithScores(ctx, "z", 0, -1).Val(); len(z) != 2 || z[0].Member != "two" || z[0].Score != -2 || z[1].Score != 1.5 {
		t.Errorf("z = %v", z)
	}
	if l := c.LRange(ctx, "l", 0, -1).Val(); len(l) != 3 || l[2] != "z" {
		t.Errorf("l = %v", l)
	}
	st := c.XRange(ctx, "st", "-", "+").Val()
	if len(st) != 2 || st[0].ID != "5-1" || st[0].Values["type"] != "turn.started" || st[1].ID != "6-0" {
		t.Errorf("st = %v", st)
	}
	if n := c.Exists(ctx, "gone").Val(); n != 0 {
		t.Errorf("a key whose TTL passed while the store was closed came back")
	}
}

// Close writes the store, and the next OpenPersistent reads it back: every
// type, binary values, TTLs (a key expired in between stays gone).
func TestPersistentAcrossClose(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "valkey", "embedded.snapshot")
	c, closeFn, err := embedded.OpenPersistent(t.Context(), embedded.Persistence{Path: path, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, c)
	closeFn()
	time.Sleep(400 * time.Millisecond) // let "gone" expire while closed: this waits on TTLs, not on a goroutine
	c2, close2, err := embedded.OpenPersistent(t.Context(), embedded.Persistence{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer close2()
	check(t, c2)
}

// Without a Close (a kill -9), what was written a snapshot interval ago is
// in the file.
func TestPersistentPeriodic(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "embedded.snapshot")
	c, closeFn, err := embedded.OpenPersistent(t.Context(), embedded.Persistence{Path: path, Every: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Read the file as a fresh stack would, until it has the key.
	deadline := time.Now().Add(10 * time.Second)
	for {
		other, closeOther, err := embedded.Open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n, err := embedded.LoadSnapshot(t.Context(), other, path)
		v := other.Get(t.Context(), "k").Val()
		closeOther()
		if err == nil && n == 1 && v == "v" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot has %d keys (k = %q, err %v) 10 s after the write", n, v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A file that is not a snapshot stops the start: starting empty would
// overwrite it at the next snapshot.
func TestPersistentRefusesBadFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "embedded.snapshot")
	if err := os.WriteFile(path, []byte("not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, closeFn, err := embedded.OpenPersistent(t.Context(), embedded.Persistence{Path: path}); err == nil {
		closeFn()
		t.Fatal("OpenPersistent on a bad file succeeded")
	}
}

// BenchmarkSnapshotClose is the cost of a snapshot of a store of about
// 4 MB (1,000 hashes of 4 fields of 1 KB): the pause every write window
// costs the embedded store while it changes.
func BenchmarkSnapshotClose(b *testing.B) {
	path := filepath.Join(b.TempDir(), "embedded.snapshot")
	c, closeFn, err := embedded.OpenPersistent(b.Context(), embedded.Persistence{Path: path, Every: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	val := string(make([]byte, 1024))
	for i := range 1000 {
		c.HSet(b.Context(), "turn:"+string(rune('a'+i%26))+time.Duration(i).String(), "a", val, "b", val, "c", val, "d", val)
	}
	closeFn()
	b.ResetTimer()
	for b.Loop() {
		c, closeFn, err := embedded.OpenPersistent(b.Context(), embedded.Persistence{Path: path, Every: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		c.Set(b.Context(), "dirty", "1", 0)
		closeFn() // one load and one snapshot
	}
}
