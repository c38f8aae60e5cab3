package valkey

import "github.com/segmentio/encoding/json"

// unmarshal decodes the JSON the record is stored as. Every step decodes
// its own turn, the heads and messages of its window and the outcomes of
// its calls: with encoding/json that was most of a step's CPU between its
// read and its write. github.com/segmentio/encoding/json reads what
// encoding/json reads and refuses what it refuses
// (FuzzCodecMatchesTheStandardLibrary) in about half the time
// (BenchmarkTurnCodec). Writes stay with encoding/json: only it knows the
// omitzero option the record's types use.
func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
