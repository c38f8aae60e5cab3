package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var sample = Event{
	At: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Conversation: "c_1", Turn: "t_1", User: "dev",
	Kind: KindApproved, CallID: "call/1", Tool: "publish_artifact", ArgumentsHash: "abc", Note: "ok",
}

func TestName(t *testing.T) {
	t.Parallel()
	if got, want := sample.Name(), "c_1/t_1/call_1-approved-abc.json"; got != want {
		t.Errorf("Name() = %q, want %q (no path separators from ids)", got, want)
	}
}

// A retried step records the same event again: one file, not two.
func TestDirIsIdempotent(t *testing.T) {
	t.Parallel()
	d := Dir{Path: t.TempDir()}
	for range 2 {
		if err := d.Record(t.Context(), sample); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	_ = filepath.WalkDir(d.Path, func(p string, e os.DirEntry, _ error) error {
		if !e.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 1 {
		t.Fatalf("files = %v, want one", files)
	}
	b, _ := os.ReadFile(files[0])
	var got Event
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample, got); diff != "" {
		t.Errorf("stored event (-want +got):\n%s", diff)
	}
}

// Directories are created when an event's write finds them missing: for a
// new turn, and again after the directory was removed.
func TestDirCreatesMissingDirectories(t *testing.T) {
	t.Parallel()
	d := Dir{Path: filepath.Join(t.TempDir(), "audit")}
	second := sample
	second.Turn, second.CallID = "t_2", "call_2"
	for _, e := range []Event{sample, second} {
		if err := d.Record(t.Context(), e); err != nil {
			t.Fatalf("Record(%s) = %v", e.Name(), err)
		}
	}
	if err := os.RemoveAll(filepath.Join(d.Path, "c_1")); err != nil {
		t.Fatal(err)
	}
	again := sample
	again.Kind = KindCall
	if err := d.Record(t.Context(), again); err != nil {
		t.Fatalf("Record after the directory was removed = %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, filepath.FromSlash(again.Name()))); err != nil {
		t.Errorf("event file after the directory was removed: %v", err)
	}
}

// BenchmarkDirRecord is the cost of one event in a turn's existing directory.
func BenchmarkDirRecord(b *testing.B) {
	d := Dir{Path: b.TempDir()}
	e := sample
	for i := 0; b.Loop(); i++ {
		e.CallID = fmt.Sprintf("call_%d", i%32)
		if err := d.Record(b.Context(), e); err != nil {
			b.Fatal(err)
		}
	}
}
