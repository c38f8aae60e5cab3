package valkey

import (
	"strconv"
	"strings"
	"testing"
)

// news builds a publication's payload of n events after prev, with ids
// from, from+1, …
func news(prev string, from, n int) string {
	p := prev
	for i := range n {
		p += "\n" + strconv.Itoa(from+i) + "-0\n" + `{"type":"step.started","turn_id":"t1"}`
	}
	return p
}

// A channel keeps the events of its publications while each continues the
// last (up to maxNews, the oldest dropped first) and serves a reader at
// any of them; a publication that does not continue them replaces them,
// and a wake-up of any other kind makes them unusable.
func TestNewsOfAChannel(t *testing.T) {
	h := &wakes{}
	s := &wakeSub{}
	w := &waker{sub: s}
	pub := func(payload string) {
		s.gen++
		if n, ok := parseNews(payload); ok {
			s.publish(n, s.gen)
		}
	}
	ids := func(after string) (string, bool) {
		evs, ok := h.fromNews(w, after, 1000)
		out := ""
		for _, e := range evs {
			out += e.ID + " "
		}
		return out, ok
	}

	pub(news("0", 1, 2))
	pub(news("2-0", 3, 1))
	if got, ok := ids("0"); !ok || got != "1-0 2-0 3-0 " {
		t.Errorf("after 0: %q, %v; want the three events", got, ok)
	}
	if got, ok := ids("2-0"); !ok || got != "3-0 " {
		t.Errorf("after 2-0: %q, %v; want 3-0", got, ok)
	}
	if got, ok := ids("3-0"); !ok || got != "" {
		t.Errorf("after the newest: %q, %v; want none, known", got, ok)
	}
	if got, ok := ids("0-5"); !ok || got != "1-0 2-0 3-0 " {
		t.Errorf("after 0-5 (after prev 0, before the first event): %q, %v; want the three events", got, ok)
	}
	if got, ok := ids("2-5"); !ok || got != "3-0 " {
		t.Errorf("after 2-5 (between two events): %q, %v; want 3-0", got, ok)
	}
	if got, ok := ids("99"); !ok || got != "" {
		t.Errorf("after an id past the newest: %q, %v; want none, known", got, ok)
	}
	if _, ok := ids("not-an-id"); ok {
		t.Error("a malformed id was served from the news")
	}
	if evs, _ := h.fromNews(w, "0", 2); len(evs) != 2 {
		t.Errorf("count 2 gave %d events", len(evs))
	}

	// What a channel keeps once its last reader left, at 2-0: the news
	// after it, which still tell that nothing else follows.
	kept := s.news
	s.news = kept.after("2-0")
	if got, ok := ids("2-0"); !ok || got != "3-0 " {
		t.Errorf("kept after 2-0, then after 2-0: %q, %v; want 3-0", got, ok)
	}
	s.news = kept.after("3-0")
	if got, ok := ids("3-0"); !ok || got != "" {
		t.Errorf("kept after the newest, then after it: %q, %v; want none, known", got, ok)
	}
	if _, ok := ids("1-0"); ok {
		t.Error("an event left behind at the reader's leaving was served")
	}
	if n := kept.after("0-0"); n.prev != "0-0" || len(n.events) != 3 {
		t.Errorf("kept after their prev, spelt 0-0: %+v, want all three", n)
	}
	if n := kept.after("2-5"); n.prev != "2-5" || len(n.events) != 1 {
		t.Errorf("kept after 2-5, between two events: %+v, want 3-0 alone", n)
	}
	if n := kept.after("not-an-id"); n.prev != "" {
		t.Errorf("kept after a malformed id: %+v, want nothing", n)
	}
	s.news = kept

	pub(news("7-0", 8, 1)) // a gap: replaces
	if _, ok := ids("3-0"); ok {
		t.Error("news were served across a gap (an id before their prev)")
	}
	if got, ok := ids("7-0"); !ok || got != "8-0 " {
		t.Errorf("after 7-0: %q, %v", got, ok)
	}

	pub(news("8-0", 9, maxNews+10)) // continues, then is trimmed
	if len(s.news.events) != maxNews || s.news.prev != strconv.Itoa(9+9)+"-0" {
		t.Errorf("kept %d events after %s, want %d after 18-0", len(s.news.events), s.news.prev, maxNews)
	}
	if _, ok := ids("8-0"); ok {
		t.Error("a trimmed event was served")
	}

	// Large events: the oldest go first, past maxNewsBytes; the newest
	// stays even alone past it.
	big := strings.Repeat("x", maxNewsBytes/3)
	bigNews := func(prev string, id int) string {
		return prev + "\n" + strconv.Itoa(id) + "-0\n" + `{"type":"llm.delta","turn_id":"t1","text":"` + big + `"}`
	}
	hugeNews := func(prev string, id int) string {
		return prev + "\n" + strconv.Itoa(id) + "-0\n" + `{"type":"llm.delta","turn_id":"t1","text":"` + big + big + big + big + `"}`
	}
	last := s.news.events[len(s.news.events)-1].ID
	pub(bigNews(last, 1000))
	pub(bigNews("1000-0", 1001))
	pub(bigNews("1001-0", 1002))
	if got, ok := ids("1000-0"); !ok || got != "1001-0 1002-0 " || s.news.prev != "1000-0" {
		t.Errorf("after three large events: %q, %v after %s; want the two newest after 1000-0", got, ok, s.news.prev)
	}
	pub(hugeNews("1002-0", 1003)) // one alone past the bound
	if len(s.news.events) != 1 || s.news.prev != "1002-0" {
		t.Errorf("after an event larger than the bound: %d kept after %s, want it alone after 1002-0", len(s.news.events), s.news.prev)
	}

	pub("") // a bare wake-up
	if _, ok := ids(s.news.prev); ok {
		t.Error("news were served after a bare wake-up")
	}
	for _, bad := range []string{"", "0", "0\n1-0", "0\n\n{}", "0\n1-0\n{not json"} {
		if _, ok := parseNews(bad); ok {
			t.Errorf("parseNews(%q) read it", bad)
		}
	}
}
