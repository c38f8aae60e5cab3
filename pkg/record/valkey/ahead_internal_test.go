package valkey

import (
	"fmt"
	"testing"
	"time"
)

// A Store keeps one read ahead per turn, the newest, and a bounded number
// in all: the ones no step took go once they are older than aheadFor, or
// past aheadKeep.
func TestReadsAheadAreBounded(t *testing.T) {
	w := newWritten()
	t0 := time.Now()
	put := func(tid string, n int64, at time.Time) { w.putAhead("c", tid, &readAhead{n: n, at: at}) }
	put("t", 2, t0)
	put("t", 1, t0) // older than the one kept
	if got := w.ahead.turns["c/t"].n; got != 2 {
		t.Errorf("kept read %d, want the newest (2)", got)
	}
	for i := range aheadKeep / 4 {
		put(fmt.Sprint("old", i), 1, t0)
	}
	put("new", 1, t0.Add(aheadFor+time.Second))
	if n := len(w.ahead.turns); n != 1 {
		t.Errorf("%d reads ahead kept after %v, want only the newest", n, aheadFor)
	}
	for i := range 3 * aheadKeep {
		put(fmt.Sprint("many", i), 1, t0.Add(aheadFor+time.Second))
	}
	if n := len(w.ahead.turns); n > aheadKeep {
		t.Errorf("%d reads ahead kept, want at most %d", n, aheadKeep)
	}
}
