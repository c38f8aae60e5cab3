package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SanitizeToolName maps a skill id onto the provider-safe tool name
// ^[a-zA-Z0-9_-]{1,64}$ (docs/design.md §3.2): other characters become '_', and a
// name longer than 64 keeps its head and ends in a short hash of the whole,
// so two long ids stay distinct.
func SanitizeToolName(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" {
		name = "tool"
	}
	if len(name) > 64 {
		sum := sha256.Sum256([]byte(id))
		name = name[:55] + "_" + hex.EncodeToString(sum[:4])
	}
	return name
}
