package smoke

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// live checks the deployment's live-event delivery, the one GET /v1/info
// names: an AppSync Events WebSocket (subscribed with the token to the
// caller's channel of the conversation) or the API's Server-Sent Events.
// A turn is sent once the subscription stands, and its turn.ended must
// arrive through it.
func (s *run) live(ctx context.Context) (string, error) {
	var info struct {
		Events *struct {
			Delivery      string `json:"delivery"`
			RealtimeURL   string `json:"realtime_url"`
			Host          string `json:"host"`
			ChannelPrefix string `json:"channel_prefix"`
		} `json:"events"`
	}
	if _, _, err := s.do(ctx, "GET", "/info", nil, &info); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TurnTimeout)
	defer cancel()
	events := make(chan map[string]any, 1000)
	var how string
	if info.Events != nil && info.Events.Delivery == "appsync" {
		e := info.Events
		if err := s.subscribeAppSync(ctx, e.RealtimeURL, e.Host, e.ChannelPrefix+strings.ReplaceAll(s.cid, "_", "-"), events); err != nil {
			return "", err
		}
		how = "AppSync Events " + e.RealtimeURL
	} else {
		if err := s.streamSSE(ctx, events); err != nil {
			return "", err
		}
		how = "Server-Sent Events"
	}
	var out struct {
		TurnID string `json:"turn_id"`
	}
	if _, _, err := s.do(ctx, "POST", "/conversations/"+s.cid+"/messages", map[string]any{"text": "What can you do?"}, &out); err != nil {
		return "", err
	}
	n := 0
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no turn.ended of %s over %s after %d events (%s)", out.TurnID, how, n, s.cfg.TurnTimeout)
		case ev, ok := <-events:
			if !ok {
				return "", fmt.Errorf("%s ended after %d events, before turn.ended of %s", how, n, out.TurnID)
			}
			if ev["turn_id"] != out.TurnID {
				continue
			}
			n++
			if ev["type"] == "turn.ended" {
				if _, err := s.wait(ctx, out.TurnID); err != nil {
					return "", err
				}
				return fmt.Sprintf("%d events of turn %s over %s", n, out.TurnID, how), nil
			}
		}
	}
}

// subscribeAppSync speaks AppSync Events' WebSocket protocol: subprotocols
// aws-appsync-event-ws and header-<base64url {host, Authorization}>,
// connection_init → connection_ack, subscribe → subscribe_success, then
// data frames (each event a JSON string) and keep-alives.
func (s *run) subscribeAppSync(ctx context.Context, realtime, host, channel string, out chan<- map[string]any) error {
	auth := map[string]string{"host": host, "Authorization": s.cfg.Token}
	hb, _ := json.Marshal(auth)
	conn, _, err := websocket.Dial(ctx, realtime, &websocket.DialOptions{HTTPClient: s.cfg.HTTP,
		Subprotocols: []string{"aws-appsync-event-ws", "header-" + base64.RawURLEncoding.EncodeToString(hb)}})
	if err != nil {
		return fmt.Errorf("connect %s: %w", realtime, err)
	}
	conn.SetReadLimit(1 << 20)
	type frame struct {
		Type   string          `json:"type"`
		ID     string          `json:"id"`
		Event  json.RawMessage `json:"event"`
		Errors json.RawMessage `json:"errors"`
	}
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	recv := func() (frame, error) {
		var f frame
		_, b, err := conn.Read(ctx)
		if err == nil {
			err = json.Unmarshal(b, &f)
		}
		return f, err
	}
	fail := func(err error) error {
		conn.CloseNow()
		return err
	}
	if err := send(map[string]string{"type": "connection_init"}); err != nil {
		return fail(err)
	}
	for want := "connection_ack"; ; {
		f, err := recv()
		if err != nil {
			return fail(fmt.Errorf("%s: %w", realtime, err))
		}
		switch {
		case f.Type == "ka":
			continue
		case f.Type == want && want == "connection_ack":
			if err := send(map[string]any{"type": "subscribe", "id": "smoke", "channel": channel, "authorization": auth}); err != nil {
				return fail(err)
			}
			want = "subscribe_success"
			continue
		case f.Type == want:
		default:
			return fail(fmt.Errorf("%s: %s %s (waiting for %s)", channel, f.Type, f.Errors, want))
		}
		break
	}
	go func() {
		defer close(out)
		defer conn.CloseNow()
		for {
			f, err := recv()
			if err != nil {
				return
			}
			var raw string
			var ev map[string]any
			if f.Type == "data" && json.Unmarshal(f.Event, &raw) == nil && json.Unmarshal([]byte(raw), &ev) == nil {
				out <- ev
			}
		}
	}()
	return nil
}

// streamSSE reads GET …/events of the conversation as Server-Sent Events.
func (s *run) streamSSE(ctx context.Context, out chan<- map[string]any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/conversations/"+s.cid+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	req.Header.Set("Accept", "text/event-stream")
	hc := *s.cfg.HTTP
	hc.Timeout = 0 // a stream: the context bounds it
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET events: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return fmt.Errorf("GET events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				if json.Unmarshal([]byte(d), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	return nil
}
