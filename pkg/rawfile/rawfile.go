//go:build unix

package rawfile

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Append appends b to the file at path, created with perm if missing, in
// one write: with O_APPEND, the lines of concurrent writers never
// interleave.
func Append(path string, b []byte, perm uint32) error {
	fd, err := open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, perm)
	if err != nil {
		return err
	}
	_, err = write(fd, b)
	if err != nil {
		err = &pathError{"write", path, err}
	}
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = &pathError{"close", path, cerr}
	}
	return err
}

// WriteAtomic writes what r reads to a new file in path's directory and
// renames it to path, so a reader sees the whole file or none. When r
// fails, nothing is left behind and its error is returned. A missing
// directory is an error satisfying errors.Is(err, fs.ErrNotExist).
func WriteAtomic(path string, r io.Reader, perm uint32) (int64, error) {
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+hex.EncodeToString(suffix[:]))
	fd, err := open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, err := copyTo(fd, tmp, r)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = &pathError{"close", tmp, cerr}
	}
	if err == nil {
		if rerr := unix.Rename(tmp, path); rerr != nil {
			err = &pathError{"rename", path, rerr}
		}
	}
	if err != nil {
		_ = unix.Unlink(tmp)
		return 0, err
	}
	return n, nil
}

func open(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, perm)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &pathError{"open", path, err}
		}
		return fd, nil
	}
}

// copyTo writes what r reads to fd, the file at path; a read error is
// returned as it is. A reader that knows its length (a file's bytes in
// memory) gets a buffer of that size.
func copyTo(fd int, path string, r io.Reader) (int64, error) {
	var n int64
	size := 32 << 10
	if l, ok := r.(interface{ Len() int }); ok {
		size = min(size, max(l.Len(), 1))
	}
	buf := make([]byte, size)
	for {
		m, rerr := r.Read(buf)
		if m > 0 {
			if _, err := write(fd, buf[:m]); err != nil {
				return n, &pathError{"write", path, err}
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// write writes all of b.
func write(fd int, b []byte) (int, error) {
	done := 0
	for done < len(b) {
		m, err := unix.Write(fd, b[done:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += m
	}
	return done, nil
}

// pathError is an error of op on path, as os reports them; it unwraps to
// the errno, which satisfies errors.Is with the io/fs errors.
type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }

func (e *pathError) Unwrap() error { return e.err }
