package valkey

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeIdle is how long a connection to the store goes unused before
// go-redis probes it again when it takes it from the pool.
const probeIdle = 250 * time.Millisecond

// Dialer is go-redis's dialer for o (its dial timeout, its TLS) with its
// connections probed only when idle (probeWhenIdle): NewClient's, for
// clients made with redis.Options of their own.
func Dialer(o *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return probeWhenIdle(redis.NewDialer(o))
}

// probeWhenIdle wraps dial so that the plain TCP and unix socket
// connections it makes are
// probed for liveness only after they were idle for probeIdle. go-redis
// probes every pooled connection it takes (a recvfrom with MSG_PEEK,
// through syscall.Conn) before each command: a system call per round trip
// that, at twenty turns at once, was 2.5% of the local stack's CPU. A
// connection used a moment ago is as alive as a probe would find it (the
// server could close it just after either), and one that idled is probed
// as before, so a restarted server's connections are still dropped before
// use. TLS connections (ElastiCache) are not syscall.Conns: go-redis never
// probes them, and they are returned as they are.
func probeWhenIdle(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sc, ok := c.(syscall.Conn)
		if !ok {
			return c, nil
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return c, nil
		}
		rc := &recentConn{Conn: c, raw: raw}
		rc.used.Store(time.Now().UnixNano())
		return rc, nil
	}
}

// recentConn is a connection that knows when it last wrote.
type recentConn struct {
	net.Conn
	raw  syscall.RawConn
	used atomic.Int64 // unix ns of the last Write
}

func (c *recentConn) Write(b []byte) (int, error) {
	c.used.Store(time.Now().UnixNano())
	return c.Conn.Write(b)
}

// SyscallConn is what go-redis probes the connection through.
func (c *recentConn) SyscallConn() (syscall.RawConn, error) { return recentRaw{c}, nil }

// recentRaw is the connection's syscall.RawConn whose Read, go-redis's
// probe, does nothing while the connection was used within probeIdle.
type recentRaw struct{ c *recentConn }

func (r recentRaw) Read(f func(fd uintptr) bool) error {
	if time.Now().UnixNano()-r.c.used.Load() < int64(probeIdle) {
		return nil
	}
	return r.c.raw.Read(f)
}

func (r recentRaw) Write(f func(fd uintptr) bool) error { return r.c.raw.Write(f) }

func (r recentRaw) Control(f func(fd uintptr)) error { return r.c.raw.Control(f) }
