package valkey

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A connection used within probeIdle is not probed (go-redis's recvfrom
// before each command); one idle for longer is, as go-redis would probe it.
func TestConnectionsAreProbedOnlyWhenIdle(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	dial := probeWhenIdle(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	})
	c, err := dial(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("dialled %T, want a syscall.Conn go-redis can probe", c)
	}
	probes := func() int {
		raw, err := sc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if err := raw.Read(func(uintptr) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if n := probes(); n != 0 {
		t.Errorf("a connection written to a moment ago was probed %d times, want 0", n)
	}
	c.(*recentConn).used.Add(-int64(probeIdle)) // as if it had idled
	if n := probes(); n != 1 {
		t.Errorf("a connection idle for %s was probed %d times, want 1", probeIdle, n)
	}
}

// BenchmarkRoundTrip is one GET against the server at VALKEY_URL, with
// go-redis probing the connection before every command as it does by
// itself, and with NewClient's dialer, which probes only an idle one.
func BenchmarkRoundTrip(b *testing.B) {
	url := os.Getenv("VALKEY_URL")
	if url == "" {
		b.Skip("set VALKEY_URL to a Valkey or Redis server")
	}
	for _, name := range []string{"probe-always", "probe-when-idle"} {
		b.Run(name, func(b *testing.B) {
			o, err := redis.ParseURL(url)
			if err != nil {
				b.Fatal(err)
			}
			if name == "probe-when-idle" {
				o.Dialer = Dialer(o)
			}
			c := redis.NewClient(o)
			defer c.Close()
			if err := c.Set(b.Context(), "roundtrip", "x", 0).Err(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := c.Get(b.Context(), "roundtrip").Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
