package turn

import (
	"encoding/json"
	"slices"
	"testing"
)

// A step's input names the writes it follows as the state machine passes
// them: one token, a batch's list (a single value for a batch of one, as
// JSONata gives it), null or nothing.
func TestAStepsInputNamesTheWritesItFollows(t *testing.T) {
	for in, want := range map[string][]string{
		`{"turn_id":"t1","after":"a-1"}`:         {"a-1"},
		`{"turn_id":"t1","after":["a-1","a-2"]}`: {"a-1", "a-2"},
		`{"turn_id":"t1","after":null}`:          nil,
		`{"turn_id":"t1","after":""}`:            nil,
		`{"turn_id":"t1"}`:                       nil,
		`{"turn_id":"t1","after":["a-1"],"x":1}`: {"a-1"},
	} {
		var r Ref
		if err := json.Unmarshal([]byte(in), &r); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if !slices.Equal(r.After, want) || r.TurnID != "t1" {
			t.Errorf("%s: After = %q, want %q", in, r.After, want)
		}
	}
	var r Ref
	if err := json.Unmarshal([]byte(`{"after":{"n":1}}`), &r); err == nil {
		t.Error("an object for after was taken")
	}
}
