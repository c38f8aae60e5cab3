// Package keepalive is the HTTP transport of clientagent's outbound
// calls: the model, the specialists over A2A and their files, MCP
// servers, the guardian agent, live-event posts and the OTLP exporter.
//
// Go's default transport keeps two idle connections per host. A process
// with more calls than that in flight to one host — the local stack with
// a few turns at once, each calling the model and the specialists —
// closes a connection after nearly every call and dials a new one for the
// next: a handshake on the call's path and a socket left in TIME_WAIT. (A
// Lambda function serves one invocation at a time, so there it changes
// little.) This transport keeps as many idle connections per host as
// calls a process has in flight.
//
// Its connections also buffer BufferSize bytes each way, where Go's
// buffer 4 KB: a request to the model (the tools, the rules and the
// transcript: often 10–30 KB) goes out in one write, not two or more.
// Otherwise it is Go's default transport.
//
// It carries no credentials and dials anything: a package that must only
// reach public addresses (pkg/agents/netguard) clones it and replaces
// the dialer.
package keepalive

import "net/http"

// MaxIdlePerHost is how many idle connections to one host are kept.
const MaxIdlePerHost = 256

// BufferSize is each connection's write and read buffer.
const BufferSize = 32 << 10

// Transport is the shared transport. Sharing it shares its connections:
// the model's, the specialists' and the rest of one process's calls reuse
// what an earlier call opened.
var Transport = New()

// New returns a transport of its own with these limits: a clone of Go's
// default transport that keeps MaxIdlePerHost idle connections per host,
// each with BufferSize buffers.
func New() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * MaxIdlePerHost
	t.MaxIdleConnsPerHost = MaxIdlePerHost
	t.WriteBufferSize, t.ReadBufferSize = BufferSize, BufferSize
	return t
}

// Client returns a client of the shared transport.
func Client() *http.Client { return &http.Client{Transport: Transport} }
