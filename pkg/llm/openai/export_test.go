package openai

import (
	"bytes"

	"github.com/clientagent/clientagent/pkg/llm"
)

// DecodeResponse decodes a whole Chat Completions body and maps it as
// Complete does, for the fuzz target (no HTTP round trip per input).
func DecodeResponse(b []byte) (*llm.Response, error) { return decodeCompletion(b) }

// DecodeStream reads a text/event-stream body of chunks and assembles and
// maps it as Complete does, for the fuzz target.
func DecodeStream(body []byte) (*llm.Response, error) {
	out, _, err := readStream(bytes.NewReader(body), func(string) {})
	return out, err
}

// EncodeRequest is the body Complete sends for req, for tests of the
// tools' schemas without a server.
func EncodeRequest(req llm.Request) ([]byte, error) {
	r, err := buildRequest("gpt-test", req)
	if err != nil {
		return nil, err
	}
	return r.encode()
}
