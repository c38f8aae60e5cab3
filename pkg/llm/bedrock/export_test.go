package bedrock

import (
	"io"

	"github.com/clientagent/clientagent/pkg/llm"
)

// ReadEvents assembles the events of a whole stream as Complete does, for
// the fuzz target (no HTTP round trip per input).
func ReadEvents(events []Event) (*llm.Response, error) {
	recv := func() (Event, error) {
		if len(events) == 0 {
			return Event{}, io.EOF
		}
		e := events[0]
		events = events[1:]
		return e, nil
	}
	res, _, err := readStream(recv, func(string) {})
	return res, err
}

// SupportsPromptCache is supportsPromptCache, for its table test.
var SupportsPromptCache = supportsPromptCache

// EscapePath is escapePath, for its table test.
var EscapePath = escapePath
