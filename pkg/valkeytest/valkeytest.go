// Package valkeytest gives tests Valkey clients: an embedded server
// (miniredis) always, and a real server when VALKEY_URL is set (CI sets
// it). Tests must use unique keys (see ID); this package never flushes a
// real server.
package valkeytest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// EnvURL names the environment variable with a real server's URL.
const EnvURL = "VALKEY_URL"

// Embedded starts a miniredis for t (stopped at cleanup) and returns it
// with a client; the server lets tests inspect TTLs and fast-forward time.
func Embedded(t testing.TB) (*miniredis.Miniredis, redis.UniversalClient) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return mr, c
}

// Real returns a client to the server at VALKEY_URL, or skips t with a
// clear message when the variable is unset.
func Real(t testing.TB) redis.UniversalClient {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Skipf("%s is not set: skipping the real-server variant (CI sets it, e.g. %s=redis://127.0.0.1:6379/0)", EnvURL, EnvURL)
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvURL, err)
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 3 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 3 * time.Second
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping %s: %v", EnvURL, err)
	}
	return c
}

// Clients returns "embedded" always and "real" when VALKEY_URL is set.
func Clients(t testing.TB) map[string]redis.UniversalClient {
	t.Helper()
	_, emb := Embedded(t)
	out := map[string]redis.UniversalClient{"embedded": emb}
	if os.Getenv(EnvURL) != "" {
		out["real"] = Real(t)
	}
	return out
}

// Each runs f as subtests "embedded" and "real"; "real" skips with a clear
// message when VALKEY_URL is unset. Subtests run in parallel.
func Each(t *testing.T, f func(t *testing.T, c redis.UniversalClient)) {
	t.Helper()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		_, c := Embedded(t)
		f(t, c)
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		f(t, Real(t))
	})
}

var seq atomic.Int64

// ID returns an id unique to this test run (process, time, sequence), so
// tests sharing a real server never see each other's keys.
func ID(t testing.TB, prefix string) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("%s-%s-%d-%d-%d", prefix, name, os.Getpid(), time.Now().UnixNano(), seq.Add(1))
}
