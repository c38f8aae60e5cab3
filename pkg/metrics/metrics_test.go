package metrics_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/metrics"
)

// A log line with Count is an Embedded Metric Format document: "_aws" with
// the metric's definition and the metric's value at the top level.
func TestCountIsEMF(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Error("store full", metrics.Count(metrics.StoreFull)...)
	var line struct {
		AWS struct {
			Timestamp         int64 `json:"Timestamp"`
			CloudWatchMetrics []struct {
				Namespace  string     `json:"Namespace"`
				Dimensions [][]string `json:"Dimensions"`
				Metrics    []struct{ Name, Unit string }
			} `json:"CloudWatchMetrics"`
		} `json:"_aws"`
		StoreFull int `json:"StoreFull"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %s: %v", buf.Bytes(), err)
	}
	m := line.AWS.CloudWatchMetrics
	if line.StoreFull != 1 || line.AWS.Timestamp == 0 || len(m) != 1 || m[0].Namespace != "clientagent" || len(m[0].Metrics) != 1 || m[0].Metrics[0].Name != "StoreFull" || m[0].Metrics[0].Unit != "Count" {
		t.Errorf("EMF line = %s", buf.Bytes())
	}
}

// Values puts several metrics on one EMF line, each with and without the
// dimensions, whose values are attributes of the line too.
func TestValuesIsEMF(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("turn ended", metrics.Values(map[string]string{"Status": "succeeded"},
		metrics.Metric{Name: metrics.TurnTokens, Unit: "Count", Value: 120},
		metrics.Metric{Name: metrics.TurnCostUSD, Unit: "None", Value: 0.0025})...)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %s: %v", buf.Bytes(), err)
	}
	want := map[string]any{
		"Timestamp": line["_aws"].(map[string]any)["Timestamp"],
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  "clientagent",
			"Dimensions": []any{[]any{}, []any{"Status"}},
			"Metrics":    []any{map[string]any{"Name": "TurnTokens", "Unit": "Count"}, map[string]any{"Name": "TurnCostUSD", "Unit": "None"}},
		}},
	}
	if diff := cmp.Diff(want, line["_aws"]); diff != "" {
		t.Errorf("_aws (-want +got):\n%s", diff)
	}
	if line["TurnTokens"] != 120.0 || line["TurnCostUSD"] != 0.0025 || line["Status"] != "succeeded" {
		t.Errorf("values = %s", buf.Bytes())
	}
}
