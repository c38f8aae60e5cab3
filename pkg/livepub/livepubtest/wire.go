package livepubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"

	"github.com/clientagent/clientagent/pkg/livesub"
)

// message is a protocol frame, as livepub writes it.
type message struct {
	Type                string               `json:"type"`
	ID                  string               `json:"id,omitempty"`
	Channel             string               `json:"channel,omitempty"`
	Authorization       *livesub.Auth        `json:"authorization,omitempty"`
	Event               json.RawMessage      `json:"event,omitempty"`
	Errors              []livesub.ProtoError `json:"errors,omitempty"`
	ConnectionTimeoutMs int                  `json:"connectionTimeoutMs,omitempty"`
}

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, 2<<20))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
