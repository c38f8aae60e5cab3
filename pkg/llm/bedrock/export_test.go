package bedrock

import (
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/clientagent/clientagent/pkg/llm"
)

// ReadEvents assembles the events of a whole stream as Complete does, for
// the fuzz target (no HTTP round trip per input).
func ReadEvents(events []types.ConverseStreamOutput) (*llm.Response, error) {
	ch := make(chan types.ConverseStreamOutput, len(events))
	for _, e := range events {
		ch <- e
	}
	close(ch)
	res, _, err := readStream(ch, func() error { return nil }, func(string) {})
	return res, err
}

// SupportsPromptCache is supportsPromptCache, for its table test.
var SupportsPromptCache = supportsPromptCache
