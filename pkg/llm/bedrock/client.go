package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/clientagent/clientagent/pkg/awssign"
)

// ConverseStreamAPI is the one call the Provider makes: ConverseStream of
// model with a request body in the Converse wire format, its answer a
// stream of events. *Client implements it.
type ConverseStreamAPI interface {
	ConverseStream(ctx context.Context, model string, body []byte) (EventStream, error)
}

// EventStream is the events of one ConverseStream answer. Recv returns
// io.EOF after the last; an exception the service sends in the stream is
// an *APIError.
type EventStream interface {
	Recv() (Event, error)
	Close() error
}

// Event is one event of a ConverseStream answer: its type (messageStart,
// contentBlockStart, contentBlockDelta, contentBlockStop, messageStop,
// metadata) and its JSON payload.
type Event struct {
	Type    string
	Payload []byte
}

// APIError is an error answer of the service, or an exception it sent in
// a stream: its code (ThrottlingException, ValidationException, …) and
// message. Status is the HTTP status of an error answer (0 in a stream).
type APIError struct {
	Code    string
	Message string
	Status  int
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// serverFault reports whether the service says the fault is its own.
func (e *APIError) serverFault() bool { return e.Status >= 500 }

// Client makes Bedrock's ConverseStream call itself: the REST-JSON
// protocol (POST /model/{modelId}/converse-stream), signed with SigV4 for
// the service "bedrock" and sent by pkg/awssign, which tries a throttled,
// failed (5xx) or unreachable call again before its stream starts; the
// answer is an application/vnd.amazon.eventstream of binary frames. The
// SDK's Bedrock runtime client would cost llmstep its package initialisers
// at every cold start.
type Client struct{ awssign.Service }

// NewClient is the Client of cfg: its region and credentials, its
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME or AWS_ENDPOINT_URL, its attempts.
func NewClient(cfg aws.Config) *Client {
	return &Client{awssign.ServiceOf(cfg, "bedrock", "bedrock-runtime", "BEDROCK_RUNTIME")}
}

var _ ConverseStreamAPI = (*Client)(nil)

// retryable are the error codes worth another attempt besides a 429 or a
// 5xx (which awssign tries again whatever their code).
var retryable = []string{"ThrottlingException", "TooManyRequestsException", "ModelNotReadyException"}

// ConverseStream sends body to model's converse-stream and returns its
// events once the answer starts. An error answer is an *APIError.
func (c *Client) ConverseStream(ctx context.Context, model string, body []byte) (EventStream, error) {
	path := "/model/" + escapePath(model) + "/converse-stream"
	build := func(ctx context.Context, base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/vnd.amazon.eventstream")
		return req, nil
	}
	a, stream, err := c.Open(ctx, "", build, func(a awssign.Answer) bool {
		code, _ := a.ServiceError()
		return slices.Contains(retryable, code)
	})
	if err != nil {
		return nil, err
	}
	if stream == nil {
		return nil, answerError(a)
	}
	return &frames{body: stream, dec: eventstream.NewDecoder()}, nil
}

// answerError is an error answer as an *APIError (awssign.Answer.ServiceError).
func answerError(a awssign.Answer) *APIError {
	code, msg := a.ServiceError()
	return &APIError{Code: code, Message: msg, Status: a.Status}
}

// frames reads an event stream's binary frames.
type frames struct {
	body io.ReadCloser
	dec  *eventstream.Decoder
	buf  []byte
}

func (f *frames) Recv() (Event, error) {
	m, err := f.dec.Decode(f.body, f.buf[:0])
	if err != nil {
		if errors.Is(err, io.EOF) {
			return Event{}, io.EOF
		}
		return Event{}, fmt.Errorf("read the event stream: %w", err)
	}
	f.buf = m.Payload
	header := func(name string) string {
		if v := m.Headers.Get(name); v != nil {
			return v.String()
		}
		return ""
	}
	switch header(":message-type") {
	case "event":
		// The payload is copied: the next frame reuses its buffer.
		return Event{Type: header(":event-type"), Payload: bytes.Clone(m.Payload)}, nil
	case "exception":
		var e struct {
			Message  string `json:"message"`
			MessageU string `json:"Message"`
		}
		_ = json.Unmarshal(m.Payload, &e)
		code := header(":exception-type")
		if code != "" {
			// modelStreamErrorException in the stream is the service's
			// ModelStreamErrorException.
			code = strings.ToUpper(code[:1]) + code[1:]
		}
		return Event{}, &APIError{Code: code, Message: e.Message + e.MessageU}
	case "error":
		return Event{}, &APIError{Code: header(":error-code"), Message: header(":error-message")}
	}
	return Event{}, fmt.Errorf("read the event stream: a frame of message type %q", header(":message-type"))
}

func (f *frames) Close() error { return f.body.Close() }

// escapePath escapes every byte of s but the unreserved ones, as the AWS
// SDKs escape a path label: "a:b/c" is "a%3Ab%2Fc".
func escapePath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
