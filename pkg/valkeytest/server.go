package valkeytest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server starts a redis-server of t's own on a free loopback port, with
// no persistence unless args say otherwise (later arguments win), and
// returns its address and process, killed at cleanup. Fault tests pause
// (SIGSTOP), kill or fill it. Without redis-server on PATH, t is skipped
// with a clear message (CI installs it).
func Server(t *testing.T, args ...string) (string, *os.Process) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed: skipping the real-server fault test (CI installs it: apt-get install redis-server)")
	}
	// A free port can be taken by another test between the probe that
	// finds it and the server's bind: the server then exits, and whatever
	// took the port must not pass for it. A server is ours once it answers
	// PING; one that exits is started again on another port.
	for range 10 {
		if addr, proc, ok := start(t, bin, args); ok {
			return addr, proc
		}
	}
	t.Fatal("redis-server did not start on any of 10 free ports")
	return "", nil
}

// start starts one redis-server on a port free a moment ago, and reports
// whether it came up there.
func start(t *testing.T, bin string, args []string) (string, *os.Process, bool) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 250 {
		select {
		case <-exited:
			return "", nil, false // the port was taken: try another
		default:
		}
		if pong(addr) {
			t.Cleanup(stop)
			return addr, cmd.Process, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	t.Fatalf("redis-server on %s did not start", addr)
	return "", nil, false
}

// pong reports whether a Redis server answers PING at addr.
func pong(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	b := make([]byte, 7)
	n, _ := io.ReadFull(c, b)
	return string(b[:n]) == "+PONG\r\n"
}

// UsedMemory is the server's used_memory (INFO memory), for fault tests
// that set maxmemory relative to it.
func UsedMemory(t testing.TB, c redis.UniversalClient) int64 {
	t.Helper()
	for _, line := range strings.Split(c.Info(t.Context(), "memory").Val(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("used_memory %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}
