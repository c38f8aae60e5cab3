// Package agents is the A2A specialists as a source of tools
// (docs/design.md §5): the Registry fetches their agent cards, caches them
// in Valkey (the CapabilityCache, on pkg/capcache) and turns them into
// catalog capabilities. Calls of those capabilities go to pkg/agents/a2acall.
//
// An unreachable agent keeps its last good card (marked unavailable)
// instead of failing the catalog. This package must not call a skill or
// link an A2A client (functions that only build the catalog link it), decide
// which call runs, validate arguments, or touch the conversation record.
package agents
