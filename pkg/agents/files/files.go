// Package files downloads the files a specialist returns by URL, within
// their bounds: only from a public address (or an allowed origin), checked
// on the address actually dialled (pkg/agents/netguard), under a size, a
// deadline and a minimum rate (Limits), so an agent can make the platform
// neither read its own network nor hold a turn with a slow or endless file.
//
// It opens the download and reports which bound ended it; it must not
// store a file, name it, or decide what the model reads about it (the
// invoker does, pkg/agents). Its client never carries credentials: a file
// URL is the agent's to choose.
package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/clientagent/clientagent/pkg/agents/netguard"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/keepalive"
	"github.com/clientagent/clientagent/pkg/tool"
)

// Limits bound each file a specialist returns, so a file that is too big
// or too slow fails its call with a message saying which bound it hit,
// instead of filling the store or holding the turn for the whole call
// timeout. Zero fields take the defaults.
type Limits struct {
	// MaxBytes bounds one file (default 512 MiB). A declared Content-Length
	// over it is refused before anything is read.
	MaxBytes int64
	// Timeout bounds one file's download, from the request to its last
	// byte (default 2 minutes).
	Timeout time.Duration
	// MinRate is the slowest a download may be, in bytes per second over
	// each RateWindow (default 8 KiB/s over 10 s; negative: no minimum).
	MinRate    int64
	RateWindow time.Duration
}

// Default limits.
const (
	DefaultMaxBytes   = 512 << 20
	DefaultTimeout    = 2 * time.Minute
	DefaultMinRate    = 8 << 10
	DefaultRateWindow = 10 * time.Second
)

// WithDefaults is l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MinRate == 0 {
		l.MinRate = DefaultMinRate
	}
	if l.RateWindow <= 0 {
		l.RateWindow = DefaultRateWindow
	}
	return l
}

// Options configures a Fetcher.
type Options struct {
	// Origins are exact origins (scheme://host:port) a file may come from
	// beside the public internet: the local stack's own URL.
	Origins []string
	// AllowPrivate turns the public-address check off (specialists that
	// serve their files on a private network, by explicit configuration).
	AllowPrivate bool
	Limits       Limits
}

// Fetcher opens file downloads. It is safe for concurrent use.
type Fetcher struct {
	// Client carries the downloads: NewFetcher's dials only public
	// addresses and the Origins (any address with AllowPrivate). It must
	// never be a client that carries credentials.
	Client  *http.Client
	origins []string
	anyAddr bool
	limits  Limits
}

// NewFetcher returns a Fetcher.
func NewFetcher(opts Options) *Fetcher {
	f := &Fetcher{Client: keepalive.Client(), origins: opts.Origins, anyAddr: opts.AllowPrivate, limits: opts.Limits.WithDefaults()}
	if !f.anyAddr {
		f.Client = netguard.Client(netguard.Options{Allow: opts.Origins})
	}
	return f
}

// Limits are the bounds of each download, defaults filled in.
func (f *Fetcher) Limits() Limits { return f.limits }

// BoundError is a file download ended by one of its own bounds (Limits):
// Bound is "deadline" or "min_rate".
type BoundError struct {
	Bound string
	msg   string
}

func (e *BoundError) Error() string { return e.msg }

// Download is one open file download.
type Download struct {
	// Body is the file, counted for the rate bound.
	Body io.Reader
	// ContentType is the response's media type, parameters dropped.
	ContentType string
	// Size is the declared size (-1: none declared).
	Size int64

	ctx  context.Context
	rc   io.ReadCloser
	stop func()
}

// Close ends the download and releases its bounds.
func (d *Download) Close() {
	d.rc.Close()
	d.stop()
}

// Bounded reports whether the download was ended by one of its bounds.
func (d *Download) Bounded() bool { return isBound(d.ctx) }

// Cause is err, or the bound that ended the download when one did.
func (d *Download) Cause(err error) error { return cause(d.ctx, err) }

// Open starts downloading uri within the file's bounds (the wait for the
// response headers counts). The error is the bound that ended it when one
// did. The caller closes the Download.
func (f *Fetcher) Open(ctx context.Context, uri string) (*Download, error) {
	ctx, counted, stop := watch(ctx, f.limits)
	rc, ctype, size, err := f.get(ctx, uri)
	if err != nil {
		err = cause(ctx, err)
		stop()
		return nil, err
	}
	counted.r = rc
	return &Download{Body: counted, ContentType: ctype, Size: size, ctx: ctx, rc: rc, stop: stop}, nil
}

func (f *Fetcher) get(ctx context.Context, uri string) (io.ReadCloser, string, int64, error) {
	if err := f.CheckURL(uri); err != nil {
		return nil, "", 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, "", 0, err
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return nil, "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, tool.SnippetLimit))
		resp.Body.Close()
		return nil, "", 0, fmt.Errorf("HTTP %s: %s", resp.Status, tool.Snippet(head))
	}
	ctype := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ctype); err == nil {
		ctype = mt
	}
	return resp.Body, ctype, resp.ContentLength, nil
}

// CheckURL refuses, by their text, file URLs a specialist must not make us
// fetch: other schemes than http(s), and (unless AllowPrivate) hosts that
// are not public addresses, numeric forms of them included. The dial-time
// check of the client is the one that holds for names and redirects; this
// one gives the clearer message. With AllowPrivate the cloud metadata
// endpoint is still refused: its answer would become a user-visible
// artifact.
func (f *Fetcher) CheckURL(uri string) error {
	if !f.anyAddr {
		return netguard.CheckURL(uri, f.origins...)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("unsupported URL scheme %q", u.Scheme)
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip == netip.MustParseAddr("fd00:ec2::254") {
			return fmt.Errorf("refusing to fetch from %s", ip)
		}
	}
	return nil
}

// countingReader counts the bytes read through it for watch.
type countingReader struct {
	r    io.Reader
	n    atomic.Int64
	done atomic.Bool // the whole file arrived: the rate no longer matters
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if err == io.EOF {
		c.done.Store(true)
	}
	return n, err
}

// watch is the context of one file download: it ends at the file
// deadline, or at the end of a rate window in which fewer than MinRate ×
// window bytes went through the returned reader. stop releases it.
func watch(ctx context.Context, lim Limits) (context.Context, *countingReader, func()) {
	counted := &countingReader{}
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, lim.Timeout, &BoundError{Bound: "deadline",
		msg: fmt.Sprintf("it did not arrive within the file transfer deadline of %s", lim.Timeout)})
	ctx, cancel := context.WithCancelCause(ctx)
	if lim.MinRate > 0 {
		go func() {
			tick := time.NewTicker(lim.RateWindow)
			defer tick.Stop()
			want := int64(float64(lim.MinRate) * lim.RateWindow.Seconds())
			var last int64
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				got := counted.n.Load()
				if counted.done.Load() {
					return
				}
				if got-last < want {
					cancel(&BoundError{Bound: "min_rate", msg: fmt.Sprintf(
						"it arrived slower than the minimum transfer rate of %s/s (%s in the last %s)",
						artifact.FormatBytes(lim.MinRate), artifact.FormatBytes(got-last), lim.RateWindow)})
					return
				}
				last = got
			}
		}()
	}
	return ctx, counted, func() { cancel(nil); cancelTimeout() }
}

// isBound reports whether a download's context ended at one of the file's
// own bounds.
func isBound(ctx context.Context) bool {
	var b *BoundError
	return errors.As(context.Cause(ctx), &b)
}

func cause(ctx context.Context, err error) error {
	if isBound(ctx) {
		return context.Cause(ctx)
	}
	return err
}
