package record

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/clientagent/clientagent/pkg/wire"
)

// Event types of a conversation's event log (issue 15, docs/api/openapi.yaml
// "GET …/events").
const (
	EventTurnStarted = wire.EventTurnStarted
	EventStepStarted = wire.EventStepStarted
	EventStepEnded   = wire.EventStepEnded
	EventLLMDelta    = wire.EventLLMDelta
	EventForm        = wire.EventForm
	EventApproval    = wire.EventApproval
	EventArtifact    = wire.EventArtifact
	EventTurnEnded   = wire.EventTurnEnded
)

// Event types of a user's own log (GET /v1/events): what the user's
// conversation list shows, wherever the change came from (another tab,
// the CLI, the API, A2A). Data holds conversation_id, and title or status.
const (
	EventConversationCreated = "conversation.created"
	EventConversationRenamed = "conversation.renamed"
	EventConversationDeleted = "conversation.deleted"
	EventConversationStatus  = "conversation.status"
)

// UserLog is the name of owner's own log in an EventLog, beside the
// conversations' logs (which are named by conversation id, "c_…"); the
// owner is encoded, so no owner id can name another log.
func UserLog(owner string) string { return "u_" + base64.RawURLEncoding.EncodeToString([]byte(owner)) }

// Event is one entry of a conversation's event log: what happened in one
// of its turns, as the steps do it. ID is the log's own id, assigned when
// the event is appended; ids grow with time, so the order of a log is
// total. Data holds the type's fields (docs/api/openapi.yaml), besides type, turn_id and
// at.
type Event struct {
	ID     string    `json:"-"`
	Type   string    `json:"type"`
	TurnID string    `json:"turn_id"`
	At     time.Time `json:"at"`
	// Data is the type's fields. An event read from the log carries
	// none: Fields decodes them from Raw for the reader that needs them.
	Data map[string]any `json:"-"`
	// Raw, when the event was read from the log, is its JSON as stored
	// (what MarshalJSON wrote), so a stream sends it without encoding it
	// again.
	Raw json.RawMessage `json:"-"`
}

// MarshalJSON writes the event as one flat object: type, turn_id, at and
// the type's fields. An event read from the log whose fields were not
// decoded is written as the log keeps it.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Data == nil && len(e.Raw) > 0 {
		return e.Raw, nil
	}
	return e.AppendJSON(make([]byte, 0, 256))
}

// eventTimeLayout is an event's at: RFC 3339 in UTC, with milliseconds.
const eventTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendJSON appends the event's JSON to b, byte for byte what
// json.Marshal writes for the flat object (its keys in order, HTML
// escaped): every write of events encodes each of them, so the object is
// written directly, not built as a map for encoding/json to sort and
// then compact again.
func (e Event) AppendJSON(b []byte) ([]byte, error) {
	keys := make([]string, 0, len(e.Data)+3)
	for k := range e.Data {
		if k != "type" && k != "turn_id" && k != "at" {
			keys = append(keys, k)
		}
	}
	keys = append(keys, "type", "turn_id", "at")
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = wire.AppendJSONString(b, k)
		b = append(b, ':')
		switch k {
		case "type":
			b = wire.AppendJSONString(b, e.Type)
		case "turn_id":
			b = wire.AppendJSONString(b, e.TurnID)
		case "at":
			b = append(b, '"')
			b = e.At.UTC().AppendFormat(b, eventTimeLayout)
			b = append(b, '"')
		default:
			var err error
			if b, err = appendJSONValue(b, e.Data[k]); err != nil {
				return nil, fmt.Errorf("event %s field %s: %w", e.Type, k, err)
			}
		}
	}
	return append(b, '}'), nil
}

// appendJSONValue appends v as json.Marshal writes it: the kinds events
// carry most directly, any other through encoding/json.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return wire.AppendJSONString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	}
	j, err := json.Marshal(v)
	return append(b, j...), err
}

// Fields returns the type's fields: Data, or for an event read from the
// log (which decodes only its type, turn and time), the fields of Raw.
func (e Event) Fields() map[string]any {
	if e.Data != nil || len(e.Raw) == 0 {
		return e.Data
	}
	var full Event
	if err := json.Unmarshal(e.Raw, &full); err != nil {
		return nil
	}
	return full.Data
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (e *Event) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	e.Type, _ = m["type"].(string)
	e.TurnID, _ = m["turn_id"].(string)
	if at, ok := m["at"].(string); ok {
		e.At, _ = time.Parse(time.RFC3339Nano, at)
	}
	delete(m, "type")
	delete(m, "turn_id")
	delete(m, "at")
	e.Data = m
	return nil
}

// EventLog keeps each conversation's live events for a while (a Valkey
// stream with a TTL): the steps append as they work, the API's event
// stream reads. The log is a convenience for live pages; the record stays
// the truth, so a step whose events cannot be written carries on.
type EventLog interface {
	// Emit appends evs in order, in one round trip.
	Emit(ctx context.Context, cid string, evs ...Event) error
	// Events reads up to count events after id after ("" or "0": from the
	// log's start; "<ms>-0": from that time), waiting up to block for the
	// first when there is none yet (0: no wait). It returns as soon as ctx
	// ends, and a reader that waits holds no connection of the store's.
	Events(ctx context.Context, cid, after string, count int, block time.Duration) ([]Event, error)
}
