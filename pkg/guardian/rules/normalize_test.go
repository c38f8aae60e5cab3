package rules

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"

	"github.com/clientagent/clientagent/pkg/guardian"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"ASCII is only lower-cased", "Hello World 101 rn Il0", "hello world 101 rn il0"},
		{"Cyrillic о", "fоrbidden", "forbidden"},
		{"Cyrillic capital І folds before its skeleton", "FORBІDDEN", "forbidden"},
		{"Greek ο", "fοrbidden", "forbidden"},
		{"fullwidth", "ｆｏｒｂｉｄｄｅｎ", "forbidden"},
		{"zero-width space", "for\u200bbidden", "forbidden"},
		{"soft hyphen", "for\u00adbid\u00adden", "forbidden"},
		{"bidi override", "\u202eforbidden\u202c", "forbidden"},
		{"mathematical bold", "𝐟𝐨𝐫𝐛𝐢𝐝𝐝𝐞𝐧", "forbidden"},
		{"combining accent", "forbidde\u0301n", "forbidden"},
		{"precomposed accent", "forbiddén", "forbidden"},
		{"circled letters", "ⓕⓞⓡⓑⓘⓓⓓⓔⓝ", "forbidden"},
		{"spaces are kept", "f o r", "f o r"},
		{"a Cyrillic letter without a Latin look-alike stays", "д", "д"},
		{"CJK stays", "今天", "今天"},
		{"invalid UTF-8 becomes U+FFFD, so stray bytes never join", "a\xffb", "a\ufffdb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Normalize(tc.in); got != tc.want {
				t.Errorf("Normalize(%+q) = %+q, want %+q", tc.in, got, tc.want)
			}
		})
	}
}

// corpusCase is one line of testdata/normalize_corpus.jsonl: a text (or a
// call's arguments) of a kind, and whether the rules of
// testdata/guardian_words.yaml block it.
type corpusCase struct {
	Want      string         `json:"want"` // block or allow
	Kind      guardian.Kind  `json:"kind"`
	Text      string         `json:"text,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Note      string         `json:"note"`
}

func (c corpusCase) input() guardian.Input {
	return guardian.Input{Kind: c.Kind, Text: c.Text, Tool: "create_svg_artifact", Arguments: c.Arguments}
}

func readCorpus(tb testing.TB) []corpusCase {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "normalize_corpus.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			tb.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

func corpusRules(tb testing.TB) *Set {
	tb.Helper()
	s, err := Load(filepath.Join("testdata", "guardian_words.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Every disguised spelling of the word, in a message, tool arguments, a
// form answer, a tool result and the model's own answer, is blocked; no
// ordinary sentence in Latin, Cyrillic, Greek, CJK, Arabic or other
// scripts is.
func TestNormalizedCorpus(t *testing.T) {
	t.Parallel()
	set := corpusRules(t)
	cases := readCorpus(t)
	var blocks, allows int
	for _, c := range cases {
		t.Run(c.Note, func(t *testing.T) {
			d, err := set.Check(t.Context(), c.input())
			if err != nil {
				t.Fatal(err)
			}
			got := "allow"
			if d.Action == guardian.Block {
				got = "block"
			}
			if got != c.Want {
				t.Errorf("%s %+q: %s (%s), want %s", c.Kind, c.input().Checked(), got, d.Rule, c.Want)
			}
		})
		if c.Want == "block" {
			blocks++
		} else {
			allows++
		}
	}
	if blocks < 40 || allows < 30 {
		t.Errorf("the corpus has %d blocks and %d allows, want the attack list and ordinary text", blocks, allows)
	}
}

// A redaction found in the normal form replaces the original characters,
// disguise included, and nothing around them.
func TestRedactionMapsBackToTheOriginal(t *testing.T) {
	t.Parallel()
	set, err := New(File{Rules: []Rule{{ID: "word", Contains: "secret", Action: guardian.Redact}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"a s\u0435cr\u0435t here", "a [redacted:word] here"},
		{"ＳＥＣＲＥＴ!", "[redacted:word]!"},
		{"x se\u200bcret\u0301 y", "x [redacted:word] y"},
		{`{"note":"my sеcret"}`, `{"note":"my [redacted:word]"}`},
	}
	for _, tc := range tests {
		d, err := set.Check(t.Context(), guardian.Input{Kind: guardian.Request, Text: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		if d.Action != guardian.Redact || d.Text != tc.want {
			t.Errorf("Check(%+q) = %s %+q, want redact %+q", tc.in, d.Action, d.Text, tc.want)
		}
	}
}

func TestSpacedAppliesToContainsOnly(t *testing.T) {
	t.Parallel()
	for _, r := range []Rule{
		{ID: "p", Pattern: "x", Spaced: true, Action: guardian.Block},
		{ID: "d", Detector: DetectEmail, Spaced: true, Action: guardian.Block},
		{ID: "empty", Contains: "\u200b", Action: guardian.Block},
	} {
		if _, err := New(File{Rules: []Rule{r}}); err == nil {
			t.Errorf("rule %s compiled, want an error", r.ID)
		}
	}
}

// FuzzNormalizedCheck starts from the corpus. Whatever the text: the normal
// form has no invisible character left, is its own normal form, maps every
// byte back into the text at rune boundaries, and invisible characters
// added between the text's runes change no decision.
func FuzzNormalizedCheck(f *testing.F) {
	for _, c := range readCorpus(f) {
		f.Add(c.input().Checked(), string(c.Kind))
	}
	set := corpusRules(f)
	f.Fuzz(func(t *testing.T, text, kind string) {
		k, err := guardian.ParseKind(kind)
		if err != nil {
			k = guardian.Request
		}
		n := normalize(text)
		for _, r := range n.text {
			if r != utf8.RuneError && unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me) {
				t.Fatalf("Normalize(%+q) = %+q keeps %U", text, n.text, r)
			}
		}
		if again := Normalize(n.text); again != n.text {
			t.Fatalf("Normalize is not idempotent on %+q: %+q then %+q", text, n.text, again)
		}
		if len(n.start) != len(n.text) || len(n.end) != len(n.text) {
			t.Fatalf("map of %+q has %d/%d entries for %d bytes", text, len(n.start), len(n.end), len(n.text))
		}
		for i := range n.text {
			s, e := n.start[i], n.end[i]
			if s < 0 || e > len(text) || s >= e || (utf8.ValidString(text) && (!utf8.RuneStart(text[s]) || e < len(text) && !utf8.RuneStart(text[e]))) {
				t.Fatalf("byte %d of %+q maps to [%d,%d) of %+q", i, n.text, s, e, text)
			}
		}
		in := guardian.Input{Kind: k, Text: text}
		d1, err := set.Check(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, r := range text {
			b.WriteRune(r)
			b.WriteString("\u200b\u00ad")
		}
		in.Text = b.String()
		d2, err := set.Check(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(text) && !strings.ContainsAny(text, "{[") && d1.Action != d2.Action {
			t.Fatalf("%+q: %s, with invisible characters between its runes: %s", text, d1.Action, d2.Action)
		}
	})
}

// The static skeleton table is the confusables library's skeleton for every
// code point in NFD (go generate writes it from the library).
func TestSkeletonTableIsTheLibrarys(t *testing.T) {
	t.Parallel()
	for r := rune(utf8.RuneSelf); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := string(r)
		if norm.NFD.String(s) != s {
			continue
		}
		if got, want := skeleton(r), confusables.Skeleton(s); got != want {
			t.Fatalf("skeleton(%U) = %q, want %q (go generate ./pkg/guardian/rules/)", r, got, want)
		}
	}
}
