package localserver

import "syscall"

// sysProcAttr puts the server in a process group of its own, so a Ctrl-C
// in the terminal reaches only the stack, which stops the server after its
// own work; and has the kernel send it SIGTERM if the stack dies without
// stopping it (kill -9).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
