package valkey

import (
	"os"
	"testing"
)

// BenchmarkTurnCodec is the JSON work of one step on its own turn: the
// turn decoded from what LoadStep reads (the reference turn, ended, as
// the store keeps it) and encoded again for SaveTurn.
func BenchmarkTurnCodec(b *testing.B) {
	body, err := os.ReadFile("testdata/turn/popelnase.turn.json")
	if err != nil {
		b.Fatal(err)
	}
	msgs, err := os.ReadFile("testdata/turn/popelnase.msgs.json")
	if err != nil {
		b.Fatal(err)
	}
	s := New(nil, Options{})
	b.ReportAllocs()
	for b.Loop() {
		t, err := decodeTurn("t1", string(body), string(msgs), map[string]string{})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, _, err := s.turnArgs(t, nil, "v"); err != nil {
			b.Fatal(err)
		}
	}
}
