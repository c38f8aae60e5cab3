//go:build unix

package localserver

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// terminate asks the server to stop: it flushes its append-only file first.
var terminate = syscall.SIGTERM

// lockDir takes an exclusive lock on path for as long as the file stays
// open; the kernel releases it when this process dies, however it dies.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrInUse
		}
		return nil, fmt.Errorf("lock file: %w", err)
	}
	return f, nil
}

// unlockDir releases the lock taken by lockDir and closes its file. The
// explicit LOCK_UN matters: a child another goroutine is forking may hold a
// copy of the descriptor until its exec, and the lock would outlive Close.
func unlockDir(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}

// processAlive reports whether a process with this id exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
