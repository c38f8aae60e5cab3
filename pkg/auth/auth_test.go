package auth

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestLocalRoundTrip(t *testing.T) {
	t.Parallel()
	l := &Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	tok, err := l.Mint("alice")
	if err != nil {
		t.Fatal(err)
	}
	other := &Local{Key: []byte("another-key-another-key-another-")}
	expired := &Local{Key: l.Key, TTL: -time.Minute}
	old, _ := expired.Mint("alice")
	tests := []struct {
		name, header, want string
		ok                 bool
	}{
		{"valid", "Bearer " + tok, "alice", true},
		{"missing", "", "", false},
		{"not bearer", "Basic abc", "", false},
		{"garbage", "Bearer abc.def.ghi", "", false},
		{"expired", "Bearer " + old, "", false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		got, err := l.Subject(r)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: Subject() = %q, %v; want %q ok=%v", tc.name, got, err, tc.want, tc.ok)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if _, err := other.Subject(r); err == nil {
		t.Errorf("Subject() with another key accepted the token")
	}
}
