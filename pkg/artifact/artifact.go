// Package artifact stores the files specialists produce and users upload,
// behind one interface with an S3 and a local-directory implementation,
// and bounds what each conversation stores (Quota, counted by a Usage the
// caller provides). Ids are opaque and scoped to their conversation. A Put
// that fails keeps nothing. It must not know about turns, tools or the
// LLM.
package artifact

import (
	"context"
	"errors"
	"io"
	"mime"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/wire"
)

// Artifact is the catalog entry of one stored file (docs/design.md §3.5).
type Artifact struct {
	ID          string    `json:"artifact_id"`
	Name        string    `json:"name"`
	MimeType    string    `json:"mime_type"`
	Description string    `json:"description,omitempty"`
	Size        int64     `json:"size,omitempty"`
	CallID      string    `json:"call_id,omitempty"` // producing call, empty for uploads
	TurnID      string    `json:"turn_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// Ref is the compact form of an artifact inside a tool result.
type Ref = wire.ArtifactRef

// Ref returns a's compact form.
func (a Artifact) Ref() Ref {
	return Ref{ID: a.ID, Name: a.Name, MimeType: a.MimeType, Description: a.Description}
}

// ErrNotFound is returned when no object exists under a conversation and id.
var ErrNotFound = errors.New("artifact: not found")

// Store keeps artifact bytes. Metadata (the catalog) lives in the
// conversation record; the store holds only bytes and content type.
type Store interface {
	// Put stores body under conversation cid and id with its content type.
	Put(ctx context.Context, cid, id, mimeType string, body io.Reader) (size int64, err error)
	// Get opens the bytes; the caller closes them. ErrNotFound if absent.
	Get(ctx context.Context, cid, id string) (body io.ReadCloser, mimeType string, err error)
	// URL returns a URL a specialist (or a browser) can fetch for ttl:
	// a presigned S3 URL, or a signed URL of the local stack.
	URL(ctx context.Context, cid, id string, ttl time.Duration) (string, error)
	// Delete removes one object; an absent one is not an error.
	Delete(ctx context.Context, cid, id string) error
	// DeleteConversation removes every object of cid.
	DeleteConversation(ctx context.Context, cid string) error
}

// Passive reports whether a file of type mimeType runs nothing when a
// browser opens it as a document (a raster image, plain text). Anything
// else (SVG, HTML, XML, PDF …) is served as an attachment, so it never
// becomes a page of the origin that serves it (issue 27).
func Passive(mimeType string) bool {
	t, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mimeType)), ";")
	switch strings.TrimSpace(t) {
	case "image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp", "text/plain":
		return true
	}
	return false
}

// Disposition is the Content-Disposition of a download of a file called
// name: inline for a passive type, else attachment.
func Disposition(name, mimeType string) string {
	kind := "attachment"
	if Passive(mimeType) {
		kind = "inline"
	}
	if d := mime.FormatMediaType(kind, map[string]string{"filename": name}); d != "" {
		return d
	}
	return kind // a name mime cannot quote: the client names the file
}
