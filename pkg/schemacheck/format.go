package schemacheck

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// formats are the "format" values drafts 4 to 7 assert; any other format
// is an annotation only.
var formats = map[string]func(string) bool{
	"date-time":             isDateTime,
	"date":                  isDate,
	"time":                  isTime,
	"duration":              isDuration,
	"period":                isPeriod,
	"hostname":              isHostname,
	"email":                 isEmail,
	"ip-address":            isIPv4,
	"ipv4":                  isIPv4,
	"ipv6":                  isIPv6,
	"uri":                   isURI,
	"iri":                   isURI,
	"uri-reference":         isURIReference,
	"uriref":                isURIReference,
	"iri-reference":         isURIReference,
	"uri-template":          isURITemplate,
	"regex":                 isRegex,
	"json-pointer":          isJSONPointer,
	"relative-json-pointer": isRelativeJSONPointer,
	"uuid":                  isUUID,
}

// decoders and mediaTypes are the contentEncoding and contentMediaType
// values draft 7 asserts.
var (
	decoders   = map[string]func(string) ([]byte, error){"base64": base64.StdEncoding.DecodeString}
	mediaTypes = map[string]func([]byte) bool{"application/json": json.Valid}
)

// isDateTime: an RFC 3339 date-time (full-date "T" full-time).
func isDateTime(s string) bool {
	if len(s) < len("2006-01-02T15:04:05Z") || (s[10] != 'T' && s[10] != 't') {
		return false
	}
	return isDate(s[:10]) && isTime(s[11:])
}

// isDate: an RFC 3339 full-date, a day that exists.
func isDate(s string) bool {
	_, err := time.Parse("2006-01-02", s)
	return err == nil
}

// digits reads the two-digit number at s[i:i+2] if it is in [lo, hi].
func digits(s string, i, lo, hi int) (int, bool) {
	if len(s) < i+2 || s[i] < '0' || s[i] > '9' || s[i+1] < '0' || s[i+1] > '9' {
		return 0, false
	}
	n := int(s[i]-'0')*10 + int(s[i+1]-'0')
	return n, n >= lo && n <= hi
}

// isTime: an RFC 3339 full-time, hh:mm:ss[.frac] and Z or an offset; a
// leap second only at 23:59 UTC.
func isTime(s string) bool {
	if len(s) < 9 || s[2] != ':' || s[5] != ':' {
		return false
	}
	h, ok1 := digits(s, 0, 0, 23)
	m, ok2 := digits(s, 3, 0, 59)
	sec, ok3 := digits(s, 6, 0, 60)
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	rest := s[8:]
	if rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 {
			return false
		}
		rest = rest[i:]
	}
	switch {
	case rest == "z" || rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digits(rest, 1, 0, 23)
		om, ok2 := digits(rest, 4, 0, 59)
		if !ok1 || !ok2 {
			return false
		}
		utc := h*60 + m - oh*60 - om // minutes of the day in UTC
		if rest[0] == '-' {
			utc = h*60 + m + oh*60 + om
		}
		utc = (utc%(24*60) + 24*60) % (24 * 60)
		h, m = utc/60, utc%60
	default:
		return false
	}
	return sec < 60 || (h == 23 && m == 59)
}

// isDuration: an RFC 3339 (ISO 8601) duration, P[nY][nM][nD][T[nH][nM][nS]]
// with its units in order and without gaps, or PnW.
func isDuration(s string) bool {
	if !strings.HasPrefix(s, "P") {
		return false
	}
	s = s[1:]
	units := func(allowed string) (string, bool) {
		var got string
		for s != "" && s[0] != 'T' {
			i := 0
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			if i == 0 || i == len(s) {
				return got, false
			}
			got += s[i : i+1]
			s = s[i+1:]
		}
		return got, got == "" || strings.Contains(allowed, got)
	}
	date, ok := units("YMD")
	if !ok {
		return date == "W" && s == ""
	}
	if s == "" {
		return date != ""
	}
	s = s[1:] // the T
	t, ok := units("HMS")
	return ok && t != "" && s == ""
}

// isPeriod: an ISO 8601 period, start/end, start/duration or duration/end.
func isPeriod(s string) bool {
	start, end, ok := strings.Cut(s, "/")
	if !ok {
		return false
	}
	if isDateTime(start) {
		return isDateTime(end) || isDuration(end)
	}
	return isDuration(start) && isDateTime(end)
}

// isHostname: an RFC 1123 host name: dot-separated labels of 1 to 63
// letters, digits and hyphens, not starting or ending with a hyphen, 253
// characters at most.
func isHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) < 1 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// isEmail: an RFC 5321 mailbox: a local part of 64 characters at most and a
// host name or a bracketed IP address, 254 characters in all.
func isEmail(s string) bool {
	at := strings.LastIndexByte(s, '@')
	if len(s) > 254 || at < 0 || at > 64 {
		return false
	}
	domain := s[at+1:]
	if len(domain) >= 2 && domain[0] == '[' && domain[len(domain)-1] == ']' {
		ip := domain[1 : len(domain)-1]
		if v6, ok := strings.CutPrefix(ip, "IPv6:"); ok {
			return isIPv6(v6)
		}
		return isIPv4(ip)
	}
	if !isHostname(domain) {
		return false
	}
	_, err := mail.ParseAddress(s)
	return err == nil
}

// isIPv4: four decimal octets, without leading zeros.
func isIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 255 || (n != 0 && p[0] == '0') || p[0] == '+' || p[0] == '-' {
			return false
		}
	}
	return true
}

func isIPv6(s string) bool { return strings.Contains(s, ":") && net.ParseIP(s) != nil }

// parseURI parses an RFC 3986 reference; an IPv6 host must be bracketed.
func parseURI(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, false
	}
	if h := u.Hostname(); strings.Contains(h, ":") {
		if !strings.Contains(u.Host, "[") || !strings.Contains(u.Host, "]") || !isIPv6(h) {
			return nil, false
		}
	}
	return u, true
}

func isURI(s string) bool {
	u, ok := parseURI(s)
	return ok && u.IsAbs()
}

func isURIReference(s string) bool {
	_, ok := parseURI(s)
	return ok && !strings.Contains(s, `\`)
}

// isURITemplate: an RFC 6570 template: a URI reference whose path's
// expressions open and close without nesting.
func isURITemplate(s string) bool {
	u, ok := parseURI(s)
	if !ok {
		return false
	}
	for _, seg := range strings.Split(u.RawPath, "/") {
		depth := 0
		for _, r := range seg {
			switch r {
			case '{':
				if depth++; depth != 1 {
					return false
				}
			case '}':
				if depth--; depth != 0 {
					return false
				}
			}
		}
		if depth != 0 {
			return false
		}
	}
	return true
}

func isRegex(s string) bool {
	_, err := regexp.Compile(s)
	return err == nil
}

// isJSONPointer: an RFC 6901 pointer: "" or "/"-led tokens whose "~" is
// followed by 0 or 1.
func isJSONPointer(s string) bool {
	if s != "" && s[0] != '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 == len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
			return false
		}
	}
	return true
}

// isRelativeJSONPointer: a non-negative integer without leading zeros,
// then "#" or a JSON pointer.
func isRelativeJSONPointer(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || (i > 1 && s[0] == '0') {
		return false
	}
	return s[i:] == "#" || isJSONPointer(s[i:])
}

// isUUID: 8-4-4-4-12 hexadecimal digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			c := s[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}
