//go:build !unix

package rawfile

import (
	"io"
	"os"
	"path/filepath"
)

// Append appends b to the file at path, created with perm if missing, in
// one write.
func Append(path string, b []byte, perm uint32) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, os.FileMode(perm))
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteAtomic writes what r reads to a new file in path's directory and
// renames it to path; when r fails, nothing is left behind.
func WriteAtomic(path string, r io.Reader, perm uint32) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Chmod(os.FileMode(perm))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return 0, err
	}
	return n, nil
}
