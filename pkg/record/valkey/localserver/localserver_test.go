package localserver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func requireBinary(t *testing.T) string {
	t.Helper()
	bin := Find()
	if bin == "" {
		t.Fatalf("none of %v on PATH: install redis-server or valkey-server (.ci/run does)", Binaries)
	}
	return bin
}

func client(t *testing.T, s *Server) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// A key written before Close is there after the next Start: the append-only
// file under the directory is the data.
func TestDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	dir := filepath.Join(t.TempDir(), "valkey")
	s, err := Start(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := client(t, s).Set(t.Context(), "k", "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, aofDirName)); err != nil {
		t.Fatalf("no append-only directory after a run: %v", err)
	}
	s2, err := Start(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	c := client(t, s2)
	if v, err := c.Get(t.Context(), "k").Result(); err != nil || v != "v" {
		t.Fatalf("after restart GET k = %q, %v; want v", v, err)
	}
	if ttl := c.TTL(t.Context(), "k").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("after restart TTL k = %v, want (0, 1h]", ttl)
	}
	if s2.Version() == "" {
		t.Error("no version")
	}
}

// A second owner of the same directory is refused while the first lives.
func TestSecondOwnerRefused(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	dir := filepath.Join(t.TempDir(), "valkey")
	s, err := Start(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s2, err := Start(t.Context(), Options{Dir: dir}); !errors.Is(err, ErrInUse) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Start error = %v, want ErrInUse", err)
	}
	if err := client(t, s).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the first server stopped answering after the refused start: %v", err)
	}
}

// A server whose owner died without stopping it (the lock released, the
// process left running) is shut down by the next Start, which keeps its
// data and runs a server of its own.
func TestStaleServerReplaced(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	dir := filepath.Join(t.TempDir(), "valkey")
	old, err := Start(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.proc.Kill() })
	if err := client(t, old).Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// The owner dies: the kernel releases its lock. (Close alone would
	// leave the lock held while another test's fork, not yet exec'd,
	// holds a copy of the descriptor: unlockDir says why.)
	unlockDir(old.lock)

	s, err := Start(t.Context(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	select {
	case <-old.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the stale server still runs after the next Start")
	}
	if s.proc.Pid == old.proc.Pid {
		t.Fatal("the new Start reused the stale process")
	}
	if v, err := client(t, s).Get(t.Context(), "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v; want the stale server's v", v, err)
	}
}
