package artifact

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// idPrefix starts every artifact id (LooksLikeID).
const idPrefix = "art_"

// idOf is the artifact id of 8 bytes: the prefix and 16 hex digits, the
// one shape of every id the platform makes.
func idOf(b [8]byte) string { return idPrefix + hex.EncodeToString(b[:]) }

// NewID returns a fresh opaque artifact id: "art_" and 16 random hex digits.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return idOf(b)
}

// CallOutputID is the id of the n-th file call callID returned: the same
// for every run of the call, so a call run again after a crash (the same
// call id, the same files) writes over what the lost run stored instead
// of leaving it on disk outside the catalog. Call ids are unique per
// conversation (they carry their turn).
func CallOutputID(callID string, n int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d", callID, n))
	return idOf([8]byte(sum[:8]))
}

// ErrInvalidName is returned for a conversation or artifact id that is not
// a safe path segment.
var ErrInvalidName = errors.New("artifact: invalid id")

// ValidName reports whether s may be used as a conversation or artifact id
// in a store: 1 to 128 characters of [A-Za-z0-9_-]. Stores check it so
// that an id can never address another conversation's objects (no "/",
// "..", or empty segments).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckNames returns ErrInvalidName (wrapped with the bad value) unless
// every name is ValidName.
func CheckNames(names ...string) error {
	for _, n := range names {
		if !ValidName(n) {
			return fmt.Errorf("%w: %q", ErrInvalidName, n)
		}
	}
	return nil
}

// LooksLikeID reports whether s has the shape of an artifact id NewID
// makes, so a value in a call's arguments may name one.
func LooksLikeID(s string) bool {
	return len(s) > len(idPrefix) && len(s) <= 64 && s[:len(idPrefix)] == idPrefix
}
