package artifact

import (
	"errors"
	"regexp"
	"testing"
)

func TestNewID(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^art_[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !re.MatchString(id) {
			t.Fatalf("NewID() = %q, want art_ + 16 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
		if !ValidName(id) {
			t.Errorf("ValidName(NewID()) = false, want true")
		}
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{"art_0123abcd", true},
		{"conv-1_A", true},
		{"", false},
		{"..", false},
		{"a/b", false},
		{"a\\b", false},
		{"a.b", false},
		{"ä", false},
		{string(make([]byte, 129)), false},
	}
	for _, tt := range tests {
		if got := ValidName(tt.in); got != tt.want {
			t.Errorf("ValidName(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if err := CheckNames("ok", "../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CheckNames(bad) = %v, want ErrInvalidName", err)
	}
}
