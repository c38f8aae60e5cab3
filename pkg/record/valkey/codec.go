package valkey

import "github.com/segmentio/encoding/json"

// unmarshal decodes the JSON the record is stored as. Every step decodes
// its own turn, the heads and messages of its window and the outcomes of
// its calls: with encoding/json that was most of a step's CPU between its
// read and its write. github.com/segmentio/encoding/json reads what
// encoding/json writes to the value encoding/json reads
// (FuzzCodecMatchesTheStandardLibrary) in about half the time
// (BenchmarkTurnCodec); on JSON the store never writes, such as a
// malformed time, the two differ. Writes stay with encoding/json: only it
// knows the omitzero option the record's types use.
func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
