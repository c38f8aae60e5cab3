package platform

import (
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/agents/files"
)

func TestFilesFromEnv(t *testing.T) {
	t.Parallel()
	def := Files{Quota: 1 << 30, Limits: files.Limits{MaxBytes: 512 << 20, Timeout: 2 * time.Minute, MinRate: 8 << 10, RateWindow: 10 * time.Second}}
	tests := []struct {
		name string
		env  map[string]string
		want Files
		ok   bool
	}{
		{"defaults", nil, def, true},
		{"sizes with units", map[string]string{"CLIENTAGENT_CONVERSATION_QUOTA": "2GiB", "CLIENTAGENT_MAX_FILE_SIZE": "100MB", "CLIENTAGENT_FILE_MIN_RATE": "1024"},
			Files{Quota: 2 << 30, Limits: files.Limits{MaxBytes: 100 << 20, Timeout: def.Limits.Timeout, MinRate: 1024, RateWindow: def.Limits.RateWindow}}, true},
		{"zero quota and rate: none", map[string]string{"CLIENTAGENT_CONVERSATION_QUOTA": "0", "CLIENTAGENT_FILE_MIN_RATE": "0"},
			Files{Quota: 0, Limits: files.Limits{MaxBytes: def.Limits.MaxBytes, Timeout: def.Limits.Timeout, MinRate: -1, RateWindow: def.Limits.RateWindow}}, true},
		{"durations", map[string]string{"CLIENTAGENT_FILE_TIMEOUT": "30s", "CLIENTAGENT_FILE_RATE_WINDOW": "2s"},
			Files{Quota: def.Quota, Limits: files.Limits{MaxBytes: def.Limits.MaxBytes, Timeout: 30 * time.Second, MinRate: def.Limits.MinRate, RateWindow: 2 * time.Second}}, true},
		{"zero file size", map[string]string{"CLIENTAGENT_MAX_FILE_SIZE": "0"}, Files{}, false},
		{"a word", map[string]string{"CLIENTAGENT_CONVERSATION_QUOTA": "lots"}, Files{}, false},
		{"an unknown unit", map[string]string{"CLIENTAGENT_CONVERSATION_QUOTA": "5TB"}, Files{}, false},
		{"a negative size", map[string]string{"CLIENTAGENT_FILE_MIN_RATE": "-5"}, Files{}, false},
		{"a bad duration", map[string]string{"CLIENTAGENT_FILE_TIMEOUT": "soon"}, Files{}, false},
		{"a zero duration", map[string]string{"CLIENTAGENT_FILE_RATE_WINDOW": "0s"}, Files{}, false},
	}
	for _, tc := range tests {
		got, err := FilesFromEnv(func(k string) string { return tc.env[k] })
		if (err == nil) != tc.ok {
			t.Errorf("%s: error = %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if tc.ok && got != tc.want {
			t.Errorf("%s: FilesFromEnv = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
