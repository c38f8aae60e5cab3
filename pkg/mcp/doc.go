// Package mcp makes the tools of MCP servers skills of the catalog, beside
// the A2A specialists' (issue 17), with the official Go SDK as the client.
//
// Source lists each configured server's tools (streamable HTTP, or stdio on
// the local stack), caches the lists in Valkey in the cache agent cards use
// (pkg/capcache: the last good list is kept and marked unavailable while a
// server is down) and, where a session can be kept (the local stack,
// Watch), refreshes a list when the server sends notifications/tools/list_changed. Each tool becomes
// a catalog.Capability named <server>_<tool>, with the tool's inputSchema as
// its parameters and its destructiveHint (or the configuration) deciding
// approval.
//
// Invoker runs one call of an MCP tool in a session of its own and maps the
// result onto a record.CallOutcome: structuredContent is the result, text the
// summary, images, audio and resources become artifacts, isError a failed
// result. A server that asks the user for input mid-call
// (elicitation/create) pauses the call with that form, as an A2A
// specialist's input-required does: the attempt is declined and ended, and
// the user's answer re-runs the call, which answers the server's elicitation
// with it (docs/architecture.md, "MCP skills"). Calls reach it through
// tool.Router, which sends it only calls of MCP tools.
//
// Like package agents, a failing server is a failed result, never a failed
// turn, and a server that is down keeps its tools in the catalog, marked
// unavailable. A server whose configuration cannot be completed (a secret
// header that cannot be read; ResolveEach) counts as down, so the local
// stack starts without it. This package must not decide which call runs, validate
// arguments, or touch the conversation record.
package mcp
