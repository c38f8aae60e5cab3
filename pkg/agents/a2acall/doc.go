// Package a2acall sends one call to one specialist over A2A
// (docs/design.md §5): the Invoker makes a blocking message/send (JSON-RPC;
// gRPC for a card that offers only gRPC) and maps whatever comes back — a
// completed task with files, an input-required task, a failure, a JSON-RPC
// error, a proxy's HTML error page, a timeout — onto a record.CallOutcome,
// copying returned files into the artifact store (pkg/agents/files).
//
// A failing specialist is a failed result, never a failed turn: the Invoker
// never returns a Go error for the specialist's misbehaviour. This package
// must not decide which call runs, validate arguments, or touch the
// conversation record; it must not truncate results for the model either
// (the caller applies docs/design.md §3.5). Only the functions that run
// calls link it (and the A2A client and gRPC with it).
package a2acall
