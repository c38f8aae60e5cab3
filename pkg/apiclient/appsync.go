package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/clientagent/clientagent/pkg/livesub"
	"github.com/clientagent/clientagent/pkg/wire"
)

// eventsInfo is GET /v1/info's events: how the deployment delivers live
// events (docs/api/openapi.yaml).
type eventsInfo struct {
	Delivery      string `json:"delivery"`
	RealtimeURL   string `json:"realtime_url"`
	Host          string `json:"host"`
	ChannelPrefix string `json:"channel_prefix"`
}

// deliveries remembers each API's delivery (a Client is copied by value).
var deliveries sync.Map // base URL → eventsInfo

// delivery reads GET /v1/info once per API; a deployment that cannot say
// is taken as "sse".
func (c *Client) delivery(ctx context.Context) eventsInfo {
	if v, ok := deliveries.Load(c.BaseURL); ok {
		return v.(eventsInfo)
	}
	var info struct {
		Events *eventsInfo `json:"events"`
	}
	if err := c.DoJSON(ctx, http.MethodGet, "/v1/info", nil, &info); err != nil || info.Events == nil {
		return eventsInfo{Delivery: "sse"}
	}
	deliveries.Store(c.BaseURL, *info.Events)
	return *info.Events
}

// appsyncEvents is Events over the deployment's AppSync Events API: it
// subscribes to the conversation's channel with the token, then reads the
// turn once (what was published before the subscription is not sent
// again: a turn already waiting or ended is handed to fn as its form,
// approval or turn.ended event), then hands fn the turn's events as they
// come. It returns nil when the connection ends (the caller subscribes
// again), after the turn's turn.ended, and an *APIError when refused.
func (c *Client) appsyncEvents(ctx context.Context, d eventsInfo, cid, tid string, fn func(wire.Event) error) error {
	seg, ok := livesub.ConversationSegment(cid)
	if !ok {
		return &APIError{Status: http.StatusNotImplemented, Code: "no_channel", Message: "this conversation has no live channel"}
	}
	sub, err := livesub.Subscribe(ctx, d.RealtimeURL, livesub.Auth{Host: d.Host, Authorization: c.Token}, d.ChannelPrefix+seg)
	var refused *livesub.RefusedError
	if errors.As(err, &refused) {
		return &APIError{Status: http.StatusUnauthorized, Code: "live_refused", Message: refused.Error()}
	}
	if err != nil {
		return err
	}
	defer sub.Close()
	t, err := c.GetTurn(ctx, cid, tid)
	if err != nil {
		return err
	}
	switch t.Status {
	case wire.StatusRunning:
	case wire.StatusAwaitingInput:
		if err := fn(wire.Event{Type: "form", TurnID: tid}); err != nil {
			return err
		}
	case wire.StatusAwaitingApproval:
		if err := fn(wire.Event{Type: "approval", TurnID: tid}); err != nil {
			return err
		}
	default:
		return fn(wire.Event{Type: "turn.ended", TurnID: tid, Status: string(t.Status), Reply: t.Reply})
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case raw, ok := <-sub.Events:
			if !ok {
				return nil
			}
			var ev wire.Event
			if json.Unmarshal(raw, &ev) != nil || ev.TurnID != tid {
				continue
			}
			if err := fn(ev); err != nil {
				return err
			}
			if ev.Type == "turn.ended" {
				return nil
			}
		}
	}
}
