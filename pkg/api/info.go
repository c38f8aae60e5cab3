package api

import "net/http"

// Info is what GET /v1/info answers: facts about the deployment a client
// shows its user, such as where conversations are kept.
type Info struct {
	Store StoreInfo `json:"store"`
	// MaxText is the longest message text the API takes, in characters,
	// so a page can say so before it sends one.
	MaxText int `json:"max_text,omitempty"`
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
	info.MaxText = s.MaxText
	writeJSON(w, http.StatusOK, info)
	return nil
}
