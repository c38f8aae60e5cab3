package rawfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteAtomicWritesAndReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "art_1")
	for _, body := range []string{"first", strings.Repeat("second, longer than the copy buffer ", 2000)} {
		n, err := WriteAtomic(path, strings.NewReader(body), 0o600)
		if err != nil || n != int64(len(body)) {
			t.Fatalf("WriteAtomic(%d bytes) = %d, %v; want %d, nil", len(body), n, err, len(body))
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != body {
			t.Fatalf("file holds %d bytes (%v), want the %d written", len(got), err, len(body))
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v (%v), want 0600", fi.Mode(), err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"art_1"}) {
		t.Errorf("directory holds %v, want only art_1", got)
	}
}

// failing reads a little, then fails.
type failing struct{ n int }

var errBroken = errors.New("the source broke")

func (f *failing) Read(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		return copy(p, "some bytes"), nil
	}
	return 0, errBroken
}

func TestWriteAtomicLeavesNothingWhenTheReaderFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "art_1")
	if _, err := WriteAtomic(path, &failing{n: 3}, 0o600); !errors.Is(err, errBroken) {
		t.Fatalf("WriteAtomic(a failing reader) error = %v, want the reader's", err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("directory holds %v, want nothing", got)
	}
}

func TestMissingDirectoryIsNotExist(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "missing")
	if _, err := WriteAtomic(filepath.Join(dir, "a"), strings.NewReader("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteAtomic into a missing directory error = %v, want fs.ErrNotExist", err)
	}
	if err := Append(filepath.Join(dir, "a"), []byte("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Append into a missing directory error = %v, want fs.ErrNotExist", err)
	}
}

// Concurrent appends of whole lines never interleave: every line is read
// back whole.
func TestAppendKeepsLinesWhole(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	const writers, lines = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			line := bytes.Repeat([]byte{byte('a' + w)}, 1000)
			line = append(line, '\n')
			for range lines {
				if err := Append(path, line, 0o600); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	for i, l := range got {
		if len(l) != 1000 || strings.Count(l, l[:1]) != 1000 {
			t.Fatalf("line %d is mixed or cut: %.40q…", i, l)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v (%v), want 0600", fi.Mode(), err)
	}
}
