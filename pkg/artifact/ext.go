package artifact

import "mime"

// preferredExt overrides mime.ExtensionsByType, whose first (sorted) answer
// for some common types is surprising (".asc" for text/plain) or depends on
// the machine's mime tables.
var preferredExt = map[string]string{
	"text/plain": ".txt", "text/html": ".html", "text/csv": ".csv", "text/markdown": ".md",
	"application/json": ".json", "application/pdf": ".pdf",
	"image/jpeg": ".jpg", "image/png": ".png", "image/svg+xml": ".svg",
	"audio/wav": ".wav", "audio/mpeg": ".mp3",
}

// ExtensionFor is the file extension (with its dot) of a file of mimeType,
// or "" when none is known: a file a source returned without a name gets
// one, so the user's download opens.
func ExtensionFor(mimeType string) string {
	if e, ok := preferredExt[mimeType]; ok {
		return e
	}
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		return exts[0]
	}
	return ""
}
