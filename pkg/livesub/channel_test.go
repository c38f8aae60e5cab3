package livesub

import (
	"strings"
	"testing"
)

// A conversation's channel: its owner's sub and its id as path segments,
// and no channel when either cannot be one.
func TestChannel(t *testing.T) {
	for _, c := range []struct {
		namespace, owner, cid, want string
		ok                          bool
	}{
		{"live", "3f2a-77", "c_0a1b", "/live/3f2a-77/c-0a1b", true},
		{"live", "", "c_0a1b", "", false},
		{"live", strings.Repeat("a", 50), "c_1", "/live/" + strings.Repeat("a", 50) + "/c-1", true},
		{"live", strings.Repeat("a", 51), "c_1", "", false},
		{"live", "user@example.com", "c_1", "", false},
		{"live", "owner", "c-1", "", false},  // a '-' in the id: the mapping would not be one to one
		{"live", "owner", "c_é", "", false},  // not ASCII
		{"li ve", "owner", "c_1", "", false}, // the namespace too
		{"live", "owner", "", "", false},
	} {
		got, ok := Channel(c.namespace, c.owner, c.cid)
		if got != c.want || ok != c.ok {
			t.Errorf("Channel(%q, %q, %q) = %q, %v; want %q, %v", c.namespace, c.owner, c.cid, got, ok, c.want, c.ok)
		}
	}
}
