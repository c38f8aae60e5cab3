package rules

import (
	"regexp"
	"strings"
	"sync"
)

// Detector names.
const (
	DetectEmail = "email"
	DetectPhone = "phone"
	DetectCard  = "card"
)

// span is one match in a text: [start, end).
type span struct{ start, end int }

// finder finds the spans of its matches in a text.
type finder func(text string) []span

var (
	emailRE = lazyRegexp(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	// A card number: 13 to 19 digits, single spaces or dashes between them.
	cardRE = lazyRegexp(`\d(?:[ -]?\d){12,18}`)
	// A phone number: an optional +country code, an optional (area code),
	// then groups of digits with single separators.
	phoneRE = lazyRegexp(`(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,5}\)[ .-]?)?\d{1,14}(?:[ .-]\d{1,14}){0,5}`)
	isoDate = lazyRegexp(`^\d{4}-\d{2}-\d{2}`)
)

// lazyRegexp compiles expr on first use: a package initialiser is part of
// the cold start of every function that links the guardian, enabled or not.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// detectors are the built-in PII detectors by name.
var detectors = map[string]finder{
	DetectEmail: findEmails,
	DetectPhone: findPhones,
	DetectCard:  findCards,
}

func findEmails(text string) []span {
	var out []span
	for _, m := range emailRE().FindAllStringIndex(text, -1) {
		if isWordByte(text, m[0]-1) && text[m[0]-1] != '.' {
			// Part of a longer token the pattern could not take whole.
			continue
		}
		out = append(out, span{m[0], m[1]})
	}
	return out
}

// findCards finds payment card numbers: 13 to 19 digits that pass the Luhn
// check, possibly grouped by spaces or dashes, not part of a longer number
// and not after a + (an international phone number passes Luhn one time in
// ten).
func findCards(text string) []span {
	var out []span
	for _, m := range cardRE().FindAllStringIndex(text, -1) {
		if isDigitAt(text, m[0]-1) || isDigitAt(text, m[1]) || (m[0] > 0 && text[m[0]-1] == '+') {
			continue
		}
		if digits := onlyDigits(text[m[0]:m[1]]); len(digits) >= 13 && len(digits) <= 19 && Luhn(digits) {
			out = append(out, span{m[0], m[1]})
		}
	}
	return out
}

// findPhones finds phone numbers: with a leading + and 8 to 15 digits
// (E.164's longest), or written with separators or an (area code) and 10
// to 15 digits. A bare run of digits without + is not taken for a phone
// number (it is more often an id or an amount), nor is an ISO date, nor a
// card number.
func findPhones(text string) []span {
	var out []span
	for _, m := range phoneRE().FindAllStringIndex(text, -1) {
		s := text[m[0]:m[1]]
		if isWordByte(text, m[0]-1) || isWordByte(text, m[1]) || (m[0] > 0 && text[m[0]-1] == '+') {
			continue
		}
		n := len(onlyDigits(s))
		plus := strings.HasPrefix(s, "+")
		grouped := strings.ContainsAny(s, " .-()")
		switch {
		case plus && n >= 8 && n <= 15:
		case !plus && grouped && n >= 10 && n <= 15:
		default:
			continue
		}
		if isoDate().MatchString(s) || len(findCards(s)) > 0 {
			continue
		}
		out = append(out, span{m[0], m[1]})
	}
	return out
}

// Luhn reports whether the decimal digits pass the Luhn checksum (a card
// number's last digit).
func Luhn(digits string) bool {
	if digits == "" {
		return false
	}
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		c := digits[i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

func onlyDigits(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func isDigitAt(s string, i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }

// isWordByte reports whether s[i] exists and is an ASCII letter, digit or
// underscore.
func isWordByte(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
