// Package rawfile writes the local stack's files (its artifacts, its audit
// log) with the system calls the write needs and no more.
//
// os.OpenFile hands every file it opens to the runtime's poller: on Linux
// that is four fcntl calls and an epoll_ctl that fails for a regular file,
// beside the open itself; os.Rename first stats its target. The reference
// turn stores two returned files (each with its type) and audits two
// calls: 55 system calls on files with os, 21 with this package (`strace
// -c` of the stack over 200 turns, docs/benchmarks.md). Each costs
// several microseconds on a virtual machine, on the step's path. It is
// for regular files on a local disk only, never pipes or sockets. Off
// Unix it writes through os (rawfile_other.go).
package rawfile
