package api

import "net/http"

// Info is what GET /v1/info answers: facts about the deployment a client
// shows its user, such as where conversations are kept.
type Info struct {
	Store StoreInfo `json:"store"`
	// Events says how this deployment delivers live events (nil: the
	// event stream of this API, "sse").
	Events *EventsInfo `json:"events,omitempty"`
	// MaxText is the longest message text the API takes, in characters,
	// so a page can say so before it sends one.
	MaxText int `json:"max_text,omitempty"`
}

// EventsInfo is how a client follows a conversation's live events.
type EventsInfo struct {
	// Delivery is "sse" (GET …/events on this API, or on the page's
	// eventsBase) or "appsync" (an AppSync Events API's WebSocket).
	Delivery string `json:"delivery"`
	// RealtimeURL is the WebSocket endpoint (appsync only).
	RealtimeURL string `json:"realtime_url,omitempty"`
	// Host is the Event API's HTTP host, which a subscriber names beside
	// its token in the authorization it sends (appsync only).
	Host string `json:"host,omitempty"`
	// Namespace is the channel namespace (appsync only). The caller's
	// channel for conversation cid is ChannelPrefix + cid.
	Namespace string `json:"namespace,omitempty"`
	// ChannelPrefix is filled per caller: /<namespace>/<sub>/.
	ChannelPrefix string `json:"channel_prefix,omitempty"`
}

// StoreInfo says where conversations are kept.
type StoreInfo struct {
	// Kind is "valkey-server", "url" (a Valkey the operator runs) or
	// "embedded" (the local stack's in-process store).
	Kind string `json:"kind"`
	// Persistent is false when a restart loses every conversation.
	Persistent bool `json:"persistent"`
	// Description is one sentence for a person.
	Description string `json:"description"`
}

// DefaultInfo is the answer of a Server without Info: a deployment's
// Valkey (ElastiCache on AWS).
var DefaultInfo = Info{Store: StoreInfo{Kind: "url", Persistent: true, Description: "conversations are kept in the deployment's Valkey"}}

func (s *Server) getInfo(w http.ResponseWriter, r *http.Request, user string) error {
	info := DefaultInfo
	if s.Info != nil {
		info = *s.Info
	}
	if info.Events == nil {
		info.Events = &EventsInfo{Delivery: "sse"}
	} else if info.Events.Delivery == "appsync" {
		ev := *info.Events
		ev.ChannelPrefix = "/" + ev.Namespace + "/" + user + "/"
		info.Events = &ev
	}
	info.MaxText = s.MaxText
	writeJSON(w, http.StatusOK, info)
	return nil
}
