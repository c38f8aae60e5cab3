// Package metrics emits CloudWatch metrics as log attributes in the
// Embedded Metric Format: a JSON log line (slog's JSON handler, as the
// Lambdas log) that carries "_aws" and the metric at its top level becomes
// a metric in the namespace, with no API call and no extra permission.
// Elsewhere (the local stack's text logs) the attributes are just fields.
package metrics

import (
	"log/slog"
	"os"
	"slices"
	"time"
)

// Namespace is the CloudWatch namespace of clientagent's own metrics:
// CLIENTAGENT_METRICS_NAMESPACE (the stack sets clientagent/<env>), else
// "clientagent".
var Namespace = func() string {
	if ns := os.Getenv("CLIENTAGENT_METRICS_NAMESPACE"); ns != "" {
		return ns
	}
	return "clientagent"
}()

// Count returns the attributes that count one occurrence of name.
func Count(name string) []any {
	return []any{
		slog.Any("_aws", map[string]any{
			"Timestamp": time.Now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  Namespace,
				"Dimensions": [][]string{{}},
				"Metrics":    []map[string]string{{"Name": name, "Unit": "Count"}},
			}},
		}),
		slog.Int(name, 1),
	}
}

// Store fault metrics (record.ErrFull, record.ErrUnavailable).
const (
	StoreFull        = "StoreFull"
	StoreUnavailable = "StoreUnavailable"
)

// LivePublishFailed counts live events that were not published to the
// AppSync Events API (pkg/livepub): a failed post or a full queue.
const LivePublishFailed = "LivePublishFailed"

// Metric is one value of an EMF line (Values).
type Metric struct {
	Name  string
	Unit  string // Count, Milliseconds, None …
	Value float64
}

// Values returns the attributes of one EMF line carrying ms, each recorded
// twice: without dimensions and with every dimension of dims (whose values
// become attributes too), so the dashboard reads both the total and the
// split, e.g. turns by status.
func Values(dims map[string]string, ms ...Metric) []any {
	names := make([]string, 0, len(dims))
	for k := range dims {
		names = append(names, k)
	}
	slices.Sort(names)
	sets := [][]string{{}}
	if len(names) > 0 {
		sets = append(sets, names)
	}
	defs := make([]map[string]string, len(ms))
	attrs := make([]any, 0, 1+len(ms)+len(dims))
	for i, m := range ms {
		defs[i] = map[string]string{"Name": m.Name, "Unit": m.Unit}
		attrs = append(attrs, slog.Float64(m.Name, m.Value))
	}
	for _, k := range names {
		attrs = append(attrs, slog.String(k, dims[k]))
	}
	return append([]any{slog.Any("_aws", map[string]any{
		"Timestamp": time.Now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  Namespace,
			"Dimensions": sets,
			"Metrics":    defs,
		}},
	})}, attrs...)
}

// Turn metrics, one line per ended turn (turn.Handlers), by Status.
const (
	TurnEnded        = "TurnEnded"        // Count: 1 per turn
	TurnTokens       = "TurnTokens"       // Count: input + output tokens
	TurnCachedTokens = "TurnCachedTokens" // Count: input tokens read from the provider's cache
	TurnCostUSD      = "TurnCostUSD"      // None: the model cost in US dollars
	TurnLLMCalls     = "TurnLLMCalls"     // Count
	TurnSteps        = "TurnSteps"        // Count: LLM calls and tool calls
	TurnDuration     = "TurnDuration"     // Milliseconds: start to end, waits for the user included
	TurnUserWait     = "TurnUserWait"     // Milliseconds: the part spent waiting for the user
)
