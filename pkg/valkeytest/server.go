package valkeytest

import (
	"fmt"
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
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, cmd.Process
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("redis-server on %s did not start", addr)
	return "", nil
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
