package openai

import (
	"bytes"
	"io"
	"net/http"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/clientagent/clientagent/pkg/llm"
)

// DecodeResponse decodes a whole Chat Completions body with the SDK and
// maps it as Complete does, for the fuzz target (no HTTP round trip per input).
func DecodeResponse(b []byte) (*llm.Response, error) { return decodeCompletion(b) }

// DecodeStream reads a text/event-stream body of chunks with the SDK's
// decoder and assembles and maps it as Complete does, for the fuzz target.
func DecodeStream(body []byte) (*llm.Response, error) {
	res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
	stream := ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
	defer stream.Close()
	out, _, err := readStream(stream, func(string) {})
	return out, err
}
