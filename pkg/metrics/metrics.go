// Package metrics emits CloudWatch metrics as log attributes in the
// Embedded Metric Format: a JSON log line (slog's JSON handler, as the
// Lambdas log) that carries "_aws" and the metric at its top level becomes
// a metric in the namespace, with no API call and no extra permission.
// Elsewhere (the local stack's text logs) the attributes are just fields.
package metrics

import (
	"log/slog"
	"os"
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
