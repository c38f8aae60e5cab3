// Package netguard keeps file fetches on the public internet: the platform
// downloading a file a specialist returned, and the demo specialists
// downloading the files they are handed. The check runs on the address
// actually dialled (a net.Dialer Control func), so DNS names, numeric
// host forms the resolver expands (2130706433, 0177.0.0.1) and redirects
// are all covered. One origin may be allowed explicitly: the local stack's
// own URL, where its artifact links and demo agents live. It must not be
// used for calls to configured specialists themselves, which may rightly
// run on a private network.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clientagent/clientagent/pkg/keepalive"
)

// ErrNotPublic is wrapped by every refusal: the address is loopback,
// private, link-local, unspecified, multicast or otherwise not a public
// unicast address.
var ErrNotPublic = errors.New("not a public address")

// nonPublic are ranges that netip's predicates do not cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (shared address space)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may reach any IPv4 address behind the gateway
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/32"),       // Teredo: embeds an IPv4 address
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
}

// Public reports whether ip is a public unicast address (an IPv4-mapped
// IPv6 address counts as its IPv4 address).
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// CheckURL refuses, by its text alone, a URL that is not http(s) or whose
// host is a non-public IP address or a numeric form of one that only some
// resolvers expand ("2130706433", "0x7f.1", "0177.0.0.1", "127.1"). It is
// the early, readable refusal; the dial-time check is the one that holds.
// A host allowed by the client's allowance is not refused here either.
func CheckURL(raw string, allow ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("unsupported URL scheme %q", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("URL without a host")
	}
	if k := hostPortKey(u); k != "" {
		for _, a := range allow {
			if originKey(a) == k {
				return nil
			}
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !Public(ip) {
			return fmt.Errorf("refusing to fetch from %s: %w", host, ErrNotPublic)
		}
		return nil
	}
	if numericHost(host) {
		return fmt.Errorf("refusing to fetch from %q: a numeric host that is not a plain IPv4 address: %w", host, ErrNotPublic)
	}
	return nil
}

// numericHost reports whether every dot-separated label of host is a
// number (decimal, octal with a leading 0, or hex with 0x): the inet_aton
// forms some resolvers turn into an address. "1e100.net" is a name.
func numericHost(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	for _, l := range labels {
		if l == "" {
			return false
		}
		if _, err := strconv.ParseUint(l, 0, 64); err != nil {
			lower := strings.ToLower(l)
			if !(strings.HasPrefix(lower, "0x") && len(lower) == 2) { // "0x" alone is 0 to inet_aton
				return false
			}
		}
	}
	return true
}

// Options configures a guarded client.
type Options struct {
	// Allow lists origins (scheme://host[:port]) that may be fetched
	// although their address is not public: the local stack's own URL.
	// Only the exact host and port are allowed, not the rest of loopback.
	Allow []string
	// Timeout bounds one whole fetch (zero: none beyond the request's
	// context).
	Timeout time.Duration
	// Base is the transport to clone (default keepalive.Transport); its
	// dialing and proxy are replaced.
	Base *http.Transport
}

// Client returns an HTTP client that dials only public addresses, and the
// allowed origins' exact host and port. Proxies are not used: with one,
// the dialled address would be the proxy's.
func Client(opts Options) *http.Client {
	return &http.Client{Transport: Transport(opts), Timeout: opts.Timeout}
}

// Transport is Client's transport.
func Transport(opts Options) *http.Transport {
	base := opts.Base
	if base == nil {
		base = keepalive.Transport
	}
	tr := base.Clone()
	tr.Proxy = nil
	allowed := map[string]bool{}
	for _, o := range opts.Allow {
		if k := originKey(o); k != "" {
			allowed[k] = true
		}
	}
	open := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	guarded := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: control}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if allowed[strings.ToLower(addr)] {
			return open.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
	tr.DialTLSContext = nil
	return tr
}

// control runs after name resolution, on each address dialled.
func control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to dial %s: %w", address, ErrNotPublic)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("refusing to fetch a file from %s: %w", ap.Addr(), ErrNotPublic)
	}
	return nil
}

// originKey is the host:port an origin URL dials ("" if it is not one).
func originKey(origin string) string {
	u, err := url.Parse(strings.TrimSpace(origin))
	if err != nil || u.Host == "" {
		return ""
	}
	return hostPortKey(u)
}

func hostPortKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return ""
		}
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}
