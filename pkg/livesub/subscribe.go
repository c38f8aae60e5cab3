package livesub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Protocol is the WebSocket subprotocol of AppSync Events; the
// authorization travels as a second one, "header-" + base64url(JSON).
const Protocol = "aws-appsync-event-ws"

// Auth is the authorization a subscriber sends: the Event API's HTTP host
// and the user's JWT (Cognito or OIDC authorization: the token itself, no
// "Bearer").
type Auth struct {
	Host          string `json:"host"`
	Authorization string `json:"Authorization"`
}

// HeaderProtocol is the subprotocol that carries a on the WebSocket
// handshake.
func HeaderProtocol(a Auth) string {
	b, _ := json.Marshal(a)
	return "header-" + base64.RawURLEncoding.EncodeToString(b)
}

// message is one frame of the protocol, either way.
type message struct {
	Type                string          `json:"type"`
	ID                  string          `json:"id,omitempty"`
	Channel             string          `json:"channel,omitempty"`
	Authorization       *Auth           `json:"authorization,omitempty"`
	Event               json.RawMessage `json:"event,omitempty"`
	Errors              []ProtoError    `json:"errors,omitempty"`
	ConnectionTimeoutMs int             `json:"connectionTimeoutMs,omitempty"`
}

// ProtoError is an error of the protocol (errorType as AppSync names it,
// e.g. UnauthorizedException).
type ProtoError struct {
	ErrorType string `json:"errorType"`
	Message   string `json:"message"`
}

// RefusedError is a connection or subscription AppSync refused.
type RefusedError struct {
	Step   string // "connection" or "subscribe"
	Errors []ProtoError
}

func (e *RefusedError) Error() string {
	if len(e.Errors) == 0 {
		return e.Step + " refused"
	}
	return e.Step + " refused: " + e.Errors[0].ErrorType + ": " + e.Errors[0].Message
}

// Subscription is one channel's events as they arrive.
type Subscription struct {
	// Events gets each event's JSON in the order AppSync delivers them;
	// it is closed when the connection ends (Err says why).
	Events <-chan json.RawMessage

	conn   *websocket.Conn
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
}

// Err is why Events was closed (nil while it is open, or after Close).
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription and its connection.
func (s *Subscription) Close() {
	s.cancel()
	s.conn.Close(websocket.StatusNormalClosure, "")
}

// Subscribe connects to the realtime endpoint (Config.RealtimeURL) with a,
// subscribes to channel and returns once AppSync confirmed it; a refusal
// is a *RefusedError. The connection ends with ctx, with Close, or when no
// keep-alive came within the timeout the server gave.
func Subscribe(ctx context.Context, realtimeURL string, a Auth, channel string) (*Subscription, error) {
	conn, resp, err := websocket.Dial(ctx, realtimeURL, &websocket.DialOptions{Subprotocols: []string{Protocol, HeaderProtocol(a)}})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, &RefusedError{Step: "connection", Errors: []ProtoError{{ErrorType: "UnauthorizedException", Message: resp.Status}}}
		}
		return nil, fmt.Errorf("live events: connect: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	fail := func(err error) (*Subscription, error) {
		conn.Close(websocket.StatusNormalClosure, "")
		return nil, err
	}
	if err := write(ctx, conn, message{Type: "connection_init"}); err != nil {
		return fail(err)
	}
	ack, err := read(ctx, conn)
	if err != nil {
		return fail(err)
	}
	if ack.Type != "connection_ack" {
		return fail(&RefusedError{Step: "connection", Errors: ack.Errors})
	}
	timeout := time.Duration(ack.ConnectionTimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := write(ctx, conn, message{Type: "subscribe", ID: id, Channel: channel, Authorization: &a}); err != nil {
		return fail(err)
	}
	for {
		m, err := read(ctx, conn)
		if err != nil {
			return fail(err)
		}
		if m.Type == "ka" {
			continue
		}
		if m.Type == "subscribe_success" && m.ID == id {
			break
		}
		return fail(&RefusedError{Step: "subscribe", Errors: m.Errors})
	}
	rctx, cancel := context.WithCancel(ctx)
	out := make(chan json.RawMessage, 256)
	s := &Subscription{Events: out, conn: conn, cancel: cancel}
	go s.read(rctx, out, id, timeout)
	return s, nil
}

func (s *Subscription) read(ctx context.Context, out chan<- json.RawMessage, id string, timeout time.Duration) {
	defer close(out)
	for {
		// A keep-alive comes well within the timeout; without one the
		// connection is taken as dead.
		rctx, cancel := context.WithTimeout(ctx, timeout)
		m, err := read(rctx, s.conn)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
			return
		}
		switch m.Type {
		case "data":
			if m.ID != id {
				continue
			}
			// The event is a JSON string holding the published JSON.
			var raw string
			if err := json.Unmarshal(m.Event, &raw); err != nil {
				continue
			}
			select {
			case out <- json.RawMessage(raw):
			case <-ctx.Done():
				return
			}
		case "ka":
		case "error", "connection_error":
			s.mu.Lock()
			s.err = &RefusedError{Step: "connection", Errors: m.Errors}
			s.mu.Unlock()
			return
		}
	}
}

func write(ctx context.Context, c *websocket.Conn, m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("live events: write %s: %w", m.Type, err)
	}
	return nil
}

func read(ctx context.Context, c *websocket.Conn) (message, error) {
	var m message
	_, b, err := c.Read(ctx)
	if err != nil {
		return m, fmt.Errorf("live events: read: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("live events: frame %q: %w", b, err)
	}
	return m, nil
}
