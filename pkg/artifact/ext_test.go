package artifact

import "testing"

// One map of extensions for every source of files (A2A specialists, MCP
// tools): the common types get the extension a user expects.
func TestExtensionFor(t *testing.T) {
	t.Parallel()
	for mt, want := range map[string]string{
		"text/plain": ".txt", "image/jpeg": ".jpg", "image/png": ".png", "application/pdf": ".pdf",
		"audio/mpeg": ".mp3", "text/markdown": ".md", "application/x-no-such-type": "",
	} {
		if got := ExtensionFor(mt); got != want {
			t.Errorf("ExtensionFor(%q) = %q, want %q", mt, got, want)
		}
	}
}
