package rules

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Normalize is text the way a reader sees it, the form the rules match
// (the checked text itself is never changed; a redaction applies to it):
//
//  1. NFKC's compatibility mapping, applied decomposed (NFKD, which is
//     NFD of NFKC): fullwidth and mathematical letters become plain ones
//     and accents become combining marks;
//  2. format characters (Cf: zero-width space and joiners, soft hyphen,
//     bidi controls) and combining marks (Mn, Me) are removed;
//  3. the text is case-folded (lower case);
//  4. every other non-ASCII letter is mapped to its Unicode TR39 confusable
//     skeleton (Cyrillic о and Greek ο become o), then case-folded again.
//
// ASCII letters and digits stay as they are: the TR39 table also maps
// ASCII to ASCII (l and I, 0 and O, rn and m), which would make ordinary
// English text match rules it does not spell. Letters of other scripts
// that look like no Latin letter (Cyrillic д, CJK, Arabic) are kept, so a
// sentence in those scripts matches a Latin rule only if it spells it.
func Normalize(text string) string { return normalize(text).text }

// normalized is a text's normalised form with, for each of its bytes, the
// original rune it came from, so a match can be mapped back.
type normalized struct {
	text       string
	orig       string
	start, end []int // byte offsets in orig, per byte of text
}

// span maps a match in the normalised text back to the original's bytes,
// with the invisible characters and marks that follow it (a redaction
// leaves no stray accent behind).
func (n normalized) span(s span) span {
	end := n.end[s.end-1]
	for end < len(n.orig) {
		r, size := utf8.DecodeRuneInString(n.orig[end:])
		if (r != utf8.RuneError || size != 1) && foldRune(r) != "" {
			break
		}
		if r == utf8.RuneError && size == 1 {
			break
		}
		end += size
	}
	return span{n.start[s.start], end}
}

func normalize(text string) normalized {
	var b strings.Builder
	b.Grow(len(text))
	n := normalized{orig: text, start: make([]int, 0, len(text)), end: make([]int, 0, len(text))}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		out := foldRune(r)
		if r == utf8.RuneError && size == 1 {
			// Not UTF-8: a replacement character, never the byte itself,
			// so two stray bytes around a removed mark cannot join into a
			// new character (the form would then not be idempotent).
			out = "\uFFFD"
		}
		b.WriteString(out)
		for range len(out) {
			n.start = append(n.start, i)
			n.end = append(n.end, i+size)
		}
		i += size
	}
	n.text = b.String()
	return n
}

//go:generate go run ./internal/skeletongen

// skeletonEntry is one row of skeletonTable (skeleton_table.go).
type skeletonEntry struct {
	r rune
	s string
}

// skeleton is the confusable skeleton of d, a code point in NFD (Unicode's
// UTS #39): the letters it is drawn like ("ѕ" → "s"). The table is static
// data, so it costs nothing at a function's start.
func skeleton(d rune) string {
	if i, ok := slices.BinarySearchFunc(skeletonTable[:], d, func(e skeletonEntry, r rune) int { return cmp.Compare(e.r, r) }); ok {
		return skeletonTable[i].s
	}
	return string(d)
}

// foldCache holds the normal form of the non-ASCII runes met so far: each
// is computed once per process (the skeleton table is a map, NFKD per rune
// allocates).
var foldCache sync.Map // rune → string

// foldRune is one original rune's normal form ("" when it is removed).
// NFKD maps each code point on its own, so the text's form is the
// concatenation of its runes' forms (the canonical reordering NFKD would
// also do concerns only combining marks, which are removed).
func foldRune(r rune) string {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return string(r)
	}
	if v, ok := foldCache.Load(r); ok {
		return v.(string)
	}
	var b strings.Builder
	for _, d := range norm.NFKD.String(string(r)) {
		if invisible(d) {
			continue
		}
		d = unicode.ToLower(d)
		if d < utf8.RuneSelf {
			b.WriteRune(d)
			continue
		}
		for _, s := range skeleton(d) {
			if !invisible(s) {
				b.WriteRune(unicode.ToLower(s))
			}
		}
	}
	out := b.String()
	// A skeleton may hold runes that fold further (º → o): fold them too,
	// so the normal form of a normal form is itself.
	if again := foldString(out, r); again != out {
		out = again
	}
	foldCache.Store(r, out)
	return out
}

// foldString folds each rune of s but self (which would recurse).
func foldString(s string, self rune) string {
	var b strings.Builder
	for _, d := range s {
		if d == self || d < utf8.RuneSelf {
			b.WriteRune(d)
			continue
		}
		b.WriteString(foldRune(d))
	}
	return b.String()
}

// invisible reports whether r is removed: a format character or a
// combining mark.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me)
}
