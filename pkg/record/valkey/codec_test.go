package valkey

import (
	stdjson "encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
)

// The record is decoded with github.com/segmentio/encoding/json
// (unmarshal) and encoded with encoding/json: whatever encoding/json
// writes, unmarshal must read back to the value encoding/json reads, so
// a record written by any version of the store reads the same. The fuzzer
// makes the values: each input encoding/json reads is written again by
// it, as the store would write that value. (On JSON the store never
// writes, such as a malformed time, the two libraries differ.)
func FuzzCodecMatchesTheStandardLibrary(f *testing.F) {
	for _, name := range []string{"testdata/turn/popelnase.turn.json", "testdata/turn/popelnase.msgs.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"call_id":"c1","tool":"t","status":"succeeded","result":{"status":"succeeded","summary":"ok"},"Events":[{"type":"step.ended","turn_id":"t1","at":"2026-12-04T00:00:00Z"}]}`))
	f.Add([]byte(`{"TURN_ID":"x","status":"running","pending":[{"call_id":"a","state":"ready","arguments":{"a":[1,2.5e3,"\u00e9\ud83d\ude00"]}}]}`))
	f.Add([]byte(`[{"role":"tool","content":"<b>&amp;</b>","tool_call_id":"c"}]`))
	f.Add([]byte(`{"id":"art_1","name":"a.png","mime_type":"image/png","size":12,"created_at":"2026-12-04T00:00:00.5Z","call_id":"c1","turn_id":"t1"}`))
	f.Add([]byte(`{"conversation_id":"c_1","owner":"dev","title":"Hi","created_at":"2026-12-04T00:00:00Z","updated_at":"2026-12-04T00:00:01Z"}`))
	f.Add([]byte(`{"type":"llm.delta","turn_id":"t1","at":"2026-12-04T00:00:00Z","offset":3,"text":"h\u00e9"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		same(t, in, func() any { return new(record.Turn) })
		same(t, in, func() any { return new([]llm.Message) })
		same(t, in, func() any { return new(record.CallOutcome) })
		same(t, in, func() any { return new(head) })
		same(t, in, func() any { return new(record.Meta) })
		same(t, in, func() any { return new(artifact.Artifact) })
		same(t, in, func() any { return new(map[string]any) }) // a skill's newest inputs
		same(t, in, func() any { return new(record.Event) })
	})
}

// same takes the value encoding/json reads from in, writes it as the
// store does, and holds what each library reads of that equal.
func same(t *testing.T, in []byte, newValue func() any) {
	t.Helper()
	v := newValue()
	if stdjson.Unmarshal(in, v) != nil {
		return
	}
	stored, err := stdjson.Marshal(v)
	if err != nil {
		return
	}
	std, ours := newValue(), newValue()
	if err := stdjson.Unmarshal(stored, std); err != nil {
		t.Fatalf("encoding/json cannot read what it wrote of %T: %v\n%s", v, err, stored)
	}
	if err := unmarshal(stored, ours); err != nil {
		t.Fatalf("unmarshal(%s) into %T = %v, want what encoding/json reads", stored, v, err)
	}
	if !reflect.DeepEqual(std, ours) {
		ob, _ := stdjson.Marshal(ours)
		t.Fatalf("unmarshal(%s) into %T:\nencoding/json %s\nunmarshal     %s", stored, v, stored, ob)
	}
}
