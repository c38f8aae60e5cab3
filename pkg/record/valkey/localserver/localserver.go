// Package localserver runs a valkey-server (or redis-server) as a child
// process of the local stack, so that `make run` keeps its conversations
// in a real Valkey whose data and append-only file live in a directory
// (e.g. .data/valkey), across restarts. The server listens only on a unix
// socket in that directory (mode 0700): nothing else on the machine reaches
// it, and no port can clash.
//
// One stack owns a directory at a time (a lock file, released by the kernel
// when the owner dies). A server that outlived its owner (a kill -9 of the
// stack) is shut down and replaced at the next start. The server is stopped
// when the stack closes, and on Linux also when the stack's process dies.
//
// This package must not be linked by a Lambda function; it starts
// processes and knows nothing of the conversation record.
package localserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binaries are the server commands looked for on PATH, in order.
var Binaries = []string{"valkey-server", "redis-server"}

// Find returns the path of the first of Binaries on PATH, or "" when none is.
func Find() string {
	for _, name := range Binaries {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// ErrInUse is Start's error when another live process owns the directory.
var ErrInUse = errors.New("another clientagent uses this data directory")

// Files in the data directory.
const (
	socketName = "valkey.sock"
	pidName    = "valkey.pid"
	lockName   = "lock"
	logName    = "valkey.log"
	aofDirName = "appendonly"
)

// Options configures Start.
type Options struct {
	// Dir holds the socket, the append-only files, the log and the lock
	// (created with mode 0700).
	Dir string
	// Binary is the server to run (default Find()).
	Binary string
	// StartTimeout bounds the start, loading the append-only file included
	// (default 60 s).
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Server is a running server process owned by this process.
type Server struct {
	dir     string
	sock    string
	version string
	lock    *os.File
	proc    *os.Process
	exited  chan struct{} // closed when the process has been waited for
	waitErr error
	stderr  *capped
	log     *slog.Logger
	once    sync.Once
}

// Start starts a server on opts.Dir, shutting down one a dead owner left
// running there, and returns once it answers PING (its append-only file
// loaded).
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	bin := opts.Binary
	if bin == "" {
		bin = Find()
	}
	if bin == "" {
		return nil, fmt.Errorf("start valkey: none of %s is on PATH", strings.Join(Binaries, ", "))
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start valkey: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start valkey: data directory: %w", err)
	}
	s := &Server{dir: dir, sock: filepath.Join(dir, socketName), log: log, exited: make(chan struct{}), stderr: &capped{max: 8 << 10}}
	if len(s.sock) > maxSocketPath {
		// Too long for a socket address: one in the temporary directory,
		// named after this directory (so a stale one is found again). Its
		// mode (0700) still admits only this user.
		sum := sha256.Sum256([]byte(dir))
		s.sock = filepath.Join(os.TempDir(), "clientagent-valkey-"+hex.EncodeToString(sum[:8])+".sock")
	}
	if s.lock, err = lockDir(filepath.Join(dir, lockName)); err != nil {
		return nil, fmt.Errorf("start valkey in %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := s.clearStale(ctx); err != nil {
		return nil, err
	}
	s.version = serverVersion(ctx, bin)
	if err := s.spawn(bin); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "valkey server started", "dir", dir, "version", s.version, "pid", s.proc.Pid)
	return s, nil
}

// maxSocketPath is the longest unix socket path every platform accepts.
const maxSocketPath = 100

// URL is the server's URL for valkey.Open (a unix socket).
func (s *Server) URL() string { return "unix://" + s.sock }

// Dir is the data directory.
func (s *Server) Dir() string { return s.dir }

// Version is the server's name and version, e.g. "redis-server 7.0.15".
func (s *Server) Version() string { return s.version }

// Close stops the server (SIGTERM: it flushes its append-only file and
// exits; SIGKILL after 15 s) and releases the directory.
func (s *Server) Close() {
	s.once.Do(func() {
		if s.proc != nil {
			_ = s.proc.Signal(terminate)
			select {
			case <-s.exited:
			case <-time.After(15 * time.Second):
				s.log.Warn("valkey server did not stop in 15 s; killing it", "pid", s.proc.Pid)
				_ = s.proc.Kill()
				<-s.exited
			}
		}
		if s.lock != nil {
			unlockDir(s.lock)
		}
	})
}

// clearStale shuts down a server a dead owner left on the socket, waits
// for one that is still stopping (its pidfile names a live process), and
// removes a dead socket. The lock is held, so no live stack owns them.
func (s *Server) clearStale(ctx context.Context) error {
	pidFile := filepath.Join(s.dir, pidName)
	if _, err := os.Stat(s.sock); err == nil {
		c := redis.NewClient(&redis.Options{Network: "unix", Addr: s.sock, DialTimeout: time.Second, ReadTimeout: 5 * time.Second, MaxRetries: -1})
		if err := c.Ping(ctx).Err(); err == nil || strings.HasPrefix(err.Error(), "LOADING") {
			s.log.WarnContext(ctx, "shutting down a valkey server left running by an earlier stack", "dir", s.dir)
			_ = c.Shutdown(ctx).Err() // the connection drops: no reply is expected
		}
		_ = c.Close()
	}
	for {
		pid := readPid(pidFile)
		if pid <= 0 || !processAlive(pid) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("start valkey: the server of an earlier stack (pid %d) is still stopping: %w", pid, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = os.Remove(pidFile)
	if err := os.Remove(s.sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("start valkey: remove a stale socket: %w", err)
	}
	return nil
}

// spawn starts the process. The append-only file is synced every second
// (appendfsync everysec) and no RDB snapshot is taken (save ""): the AOF is
// the data. TCP is off (port 0). The per-command latency histograms
// (latency-tracking, which nothing here reads) are off: they cost about 2%
// of the server's CPU.
func (s *Server) spawn(bin string) error {
	args := []string{
		"--port", "0",
		"--unixsocket", s.sock, "--unixsocketperm", "700",
		"--dir", s.dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--appenddirname", aofDirName,
		"--save", "",
		"--latency-tracking", "no",
		"--pidfile", filepath.Join(s.dir, pidName),
		"--logfile", filepath.Join(s.dir, logName),
		"--daemonize", "no",
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	cmd.SysProcAttr = sysProcAttr()
	started := make(chan error, 1)
	// On Linux the child gets SIGTERM when the thread that started it ends
	// (Pdeathsig), so that thread is kept for the child's life: it ends
	// with the process, or after the child has exited.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			runtime.UnlockOSThread()
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start valkey: %s: %w", bin, err)
	}
	s.proc = cmd.Process
	return nil
}

// waitReady waits until the server answers PING, or fails with what it
// said when it exits first.
func (s *Server) waitReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: s.sock, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	defer c.Close()
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("start valkey: the server exited (%v): %s%s", s.waitErr, strings.TrimSpace(s.stderr.String()), s.logTail())
		default:
		}
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("start valkey: no answer on %s: %w%s", s.sock, ctx.Err(), s.logTail())
		case <-s.exited:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail is the end of the server's log, for an error.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, logName))
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return "\nits log (" + filepath.Join(s.dir, logName) + ") ends with:\n" + strings.TrimSpace(string(b))
}

var versionRE = regexp.MustCompile(`v=([0-9][0-9A-Za-z.\-]*)`)

// serverVersion is "<binary name> <version>" as `--version` says it.
func serverVersion(ctx context.Context, bin string) string {
	name := filepath.Base(bin)
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return name
	}
	if m := versionRE.FindSubmatch(out); m != nil {
		return name + " " + string(m[1])
	}
	return name
}

func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
