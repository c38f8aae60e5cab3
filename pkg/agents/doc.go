// Package agents is how the orchestrator reaches specialist agents over A2A
// (docs/design.md §5): the Registry fetches and caches their agent cards in Valkey
// (the CapabilityCache, on pkg/capcache) and turns them into catalog capabilities, and the
// Invoker sends one call to one specialist with a blocking message/send and
// maps whatever comes back — a completed task with files, an input-required
// task, a failure, a JSON-RPC error, a proxy's HTML error page, a timeout —
// onto a record.CallOutcome.
//
// A failing specialist is a failed result, never a failed turn: the Invoker
// never returns a Go error for the specialist's misbehaviour, and the
// Registry keeps an unreachable agent's last good card (marked unavailable)
// instead of failing the catalog. This package must not decide which call
// runs, validate arguments, or touch the conversation record; it must not
// truncate results for the model either (the caller applies docs/design.md §3.5).
package agents
