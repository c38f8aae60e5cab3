package tool

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCapRaw(t *testing.T) {
	t.Parallel()
	small := []byte(`{"a":1}`)
	if got := CapRaw(small); string(got) != string(small) {
		t.Errorf("CapRaw(small) = %s, want unchanged", got)
	}
	big := MustJSON(map[string]string{"x": strings.Repeat("é\"", MaxRaw)})
	got := CapRaw(big)
	if len(got) > MaxRaw || !json.Valid(got) {
		t.Fatalf("CapRaw(big) = %d bytes valid=%v, want ≤ %d and valid JSON", len(got), json.Valid(got), MaxRaw)
	}
	var v struct {
		Truncated bool `json:"truncated"`
		Size      int  `json:"size"`
	}
	if err := json.Unmarshal(got, &v); err != nil || !v.Truncated || v.Size != len(big) {
		t.Errorf("CapRaw(big) = truncated %v size %d, want true %d", v.Truncated, v.Size, len(big))
	}
}
