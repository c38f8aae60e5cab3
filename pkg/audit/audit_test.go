package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// A retried step records the same event again: the reader sees it once,
// as the last write has it, and events of other names apart, in order.
func TestDirIsIdempotent(t *testing.T) {
	t.Parallel()
	d := Dir{Path: t.TempDir()}
	other := sample
	other.CallID, other.Kind = "call_2", KindCall
	retried := sample
	retried.Note = "ok, retried"
	for _, e := range []Event{sample, other, retried} {
		if err := d.Record(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadDir(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Event{retried, other}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	files, _ := filepath.Glob(filepath.Join(d.Path, "*"))
	if want := filepath.Join(d.Path, "2026-11-30.jsonl"); len(files) != 1 || files[0] != want {
		t.Errorf("files = %v, want only %s (one file per day)", files, want)
	}
}

// The directory is created when an append finds it missing: the first
// time, and again after it was removed.
func TestDirCreatesMissingDirectories(t *testing.T) {
	t.Parallel()
	d := Dir{Path: filepath.Join(t.TempDir(), "audit")}
	if err := d.Record(t.Context(), sample); err != nil {
		t.Fatalf("Record into a missing directory = %v", err)
	}
	if err := os.RemoveAll(d.Path); err != nil {
		t.Fatal(err)
	}
	again := sample
	again.Kind = KindCall
	if err := d.Record(t.Context(), again); err != nil {
		t.Fatalf("Record after the directory was removed = %v", err)
	}
	if got, err := ReadDir(d.Path); err != nil || len(got) != 1 || got[0] != again {
		t.Errorf("ReadDir() = %v, %v, want the event written after the removal", got, err)
	}
}

// Concurrent writers (steps of one process, or two processes) append whole
// lines: none is lost or torn.
func TestDirConcurrentAppends(t *testing.T) {
	t.Parallel()
	d := Dir{Path: t.TempDir()}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				e := sample
				e.CallID = fmt.Sprintf("call_%d_%d", w, i)
				e.Note = strings.Repeat("n", 3000) // lines longer than a pipe's atomic write
				if err := d.Record(t.Context(), e); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got, err := ReadDir(d.Path)
	if err != nil || len(got) != 400 {
		t.Fatalf("ReadDir() = %d events, %v; want 400", len(got), err)
	}
}

// A write cut short (a full disk) leaves part of a line, which the next
// append continues: the reader skips the torn part and reads the rest.
func TestReadDirSkipsATornWrite(t *testing.T) {
	t.Parallel()
	d := Dir{Path: t.TempDir()}
	file := filepath.Join(d.Path, "2026-11-30.jsonl")
	whole, _ := json.Marshal(line{Name: sample.Name(), Event: sample})
	if err := os.WriteFile(file, whole[:len(whole)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	next := sample
	next.CallID = "call_2"
	if err := d.Record(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDir(d.Path)
	if err != nil || len(got) != 1 || got[0] != next {
		t.Fatalf("ReadDir() = %v, %v; want the whole event after the torn one", got, err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, "2026-12-01.jsonl"), []byte("not json\n"+string(whole)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDir(d.Path); err == nil {
		t.Error("ReadDir() of a line that is no event = nil error, want one")
	}
}

// BenchmarkDirRecord is the cost of one event.
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
