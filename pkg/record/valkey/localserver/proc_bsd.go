//go:build unix && !linux

package localserver

import "syscall"

// sysProcAttr puts the server in a process group of its own, so a Ctrl-C
// in the terminal reaches only the stack, which stops the server after its
// own work. (Only Linux can stop it when the stack is killed; the next
// start shuts such a server down.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
