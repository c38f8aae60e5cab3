package openai

import (
	oai "github.com/openai/openai-go/v3"

	"github.com/clientagent/clientagent/pkg/llm"
)

// DecodeResponse decodes a Chat Completions body with the SDK and maps it
// as Complete does, for the fuzz target (no HTTP round trip per input).
func DecodeResponse(b []byte) (*llm.Response, error) {
	var res oai.ChatCompletion
	if err := res.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return mapResponse(&res)
}
