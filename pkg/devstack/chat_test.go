package devstack

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/chatcli"
)

// Issue 6: `clientagent chat` against the real local stack: a form asked at
// the prompt, an approval answered y, progress lines, artifacts saved.
func TestChatCLIAgainstStack(t *testing.T) {
	t.Parallel()
	st, c := stack(t, nil)
	dir := t.TempDir()
	in := strings.NewReader(strings.Join([]string{
		"Create a PNG image with the word Popelnase",
		"Design a valve flange with 4 holes",
		"brass",
		"Publish it to web",
		"y",
		"/workflows",
		"/workflow word_to_png",
		"Workflowed",
		"/workflow publish_word",
		"Chatty",
		"web",
		"y",
		"/quit",
	}, "\n") + "\n")
	var out bytes.Buffer
	err := chatcli.Run(t.Context(), chatcli.Options{BaseURL: c.base, Token: c.token, In: in, Out: &out, OutDir: dir, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Run() = %v\n%s", err, out.String())
	}
	for _, want := range []string{"create_svg_artifact succeeded", "convert_svg_to_png succeeded", "material", "Approve publish_artifact", "publish_artifact succeeded",
		"word_to_png — Word to PNG", "    word (string) The word to render.", "workflow_word_to_png succeeded", "Word to PNG finished",
		"workflow_publish_word step 3 Publish: publish_artifact", "workflow_publish_word succeeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	f, err := os.Open(filepath.Join(dir, "Popelnase.png"))
	if err != nil {
		t.Fatalf("the PNG was not saved: %v", err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("saved PNG does not decode: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "Workflowed.png")); err != nil {
		t.Errorf("the workflow's PNG was not saved: %v", err)
	}
	if n := len(st.Publications.List()); n != 2 {
		t.Errorf("publications = %d, want 2 (a skill call and a workflow's step)", n)
	}
}

// Issue 28: the chat prints each step on its own line, even after a
// streamed reply; names artifacts rather than showing raw ids; and says
// what a turn spent.
func TestChatCLIStepLinesNamesAndSpend(t *testing.T) {
	t.Parallel()
	_, c := stack(t, nil, func(cfg *Config) { cfg.ChunkDelay = time.Millisecond })
	in := strings.NewReader(strings.Join([]string{
		"Create an SVG with the word Hello",
		"Publish it to web",
		"n not yet",
		"/quit",
	}, "\n") + "\n")
	var out bytes.Buffer
	err := chatcli.Run(t.Context(), chatcli.Options{BaseURL: c.base, Token: c.token, In: in, Out: &out, OutDir: t.TempDir(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Run() = %v\n%s", err, out.String())
	}
	got := out.String()
	if !regexp.MustCompile(`Approve publish_artifact \{[^\n]*"art_[^"]+"[^\n]*\} \(art_[A-Za-z0-9_-]+ is Hello\.svg\)`).MatchString(got) {
		t.Errorf("the approval does not name the artifact Hello.svg:\n%s", got)
	}
	for _, line := range []string{"✓ create_svg_artifact succeeded", "⊘ publish_artifact rejected"} {
		i := strings.Index(got, line)
		if i < 0 {
			t.Errorf("output lacks %q:\n%s", line, got)
		} else if i > 0 && got[i-1] != '\n' {
			t.Errorf("%q is glued to what came before it: %q", line, got[max(0, i-40):i+len(line)])
		}
	}
	if n := len(regexp.MustCompile(`\(\d+ LLM calls?, [\d,]+ tokens`).FindAllString(got, -1)); n != 2 {
		t.Errorf("%d turns said their LLM calls and tokens, want 2:\n%s", n, got)
	}
}
