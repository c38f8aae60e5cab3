package metrics_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

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
