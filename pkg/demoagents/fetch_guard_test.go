package demoagents

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// The demo agents fetch the files they are handed only from public
// addresses and their own stack's origin: a link to another loopback port,
// to the metadata endpoint or in a numeric disguise is refused with a
// clear failure, while the stack's own /files/ link works.
func TestInputFilesOnlyFromPublicOrOwnOrigin(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	c := s.client(t, PathPNG)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10"/></svg>`)
	port := s.files.URL[strings.LastIndex(s.files.URL, ":")+1:]
	tests := []struct {
		name  string
		part  a2a.FilePart
		state a2a.TaskState
		want  string // in the failure message
	}{
		{"own origin", s.put("art_own", "a.svg", "image/svg+xml", svg), a2a.TaskStateCompleted, ""},
		{"other loopback port", s.putAt(s.files.URL, "art_other", "a.svg", "image/svg+xml", svg), a2a.TaskStateFailed, "not"},
		{"localhost by name", s.putAt("http://localhost:"+port, "art_name", "a.svg", "image/svg+xml", svg), a2a.TaskStateFailed, "not on a public address"},
		{"decimal loopback", s.putAt("http://2130706433:"+port, "art_dec", "a.svg", "image/svg+xml", svg), a2a.TaskStateFailed, "not allowed"},
		{"metadata endpoint", s.putAt("http://169.254.169.254", "art_meta", "a.svg", "image/svg+xml", svg), a2a.TaskStateFailed, "not allowed"},
	}
	for _, tc := range tests {
		id, _ := tc.part.Metadata["artifact_id"].(string)
		task := send(t, c, "call_"+id, map[string]any{"artifact_id": id}, tc.part)
		if task.Status.State != tc.state {
			t.Errorf("%s: task state = %s (%s), want %s", tc.name, task.Status.State, statusText(task), tc.state)
			continue
		}
		if tc.want != "" && !strings.Contains(statusText(task), tc.want) {
			t.Errorf("%s: failure message = %q, want it to contain %q", tc.name, statusText(task), tc.want)
		}
	}
}
