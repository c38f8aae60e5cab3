//go:build !unix

package localserver

import (
	"os"
	"syscall"
)

var terminate = os.Kill

func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}

func unlockDir(f *os.File) { _ = f.Close() }

func processAlive(int) bool { return false }

func sysProcAttr() *syscall.SysProcAttr { return nil }
