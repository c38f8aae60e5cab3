package platform

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/agents/files"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// DefaultConversationQuota is how many bytes of artifacts one conversation
// may store (uploads and specialists' files together) unless
// CLIENTAGENT_CONVERSATION_QUOTA says otherwise.
const DefaultConversationQuota = 1 << 30

// Files are the bounds of stored files.
type Files struct {
	// Limits bound each file a specialist returns (size, deadline, rate).
	Limits files.Limits
	// Quota bounds each conversation's stored bytes (<= 0: none).
	Quota int64
}

// FilesFromEnv reads the file bounds, starting from the defaults:
//
//	CLIENTAGENT_CONVERSATION_QUOTA  bytes per conversation (e.g. 1GiB, 500MiB; 0: none)      default 1GiB
//	CLIENTAGENT_MAX_FILE_SIZE       bytes of one file a specialist returns                   default 512MiB
//	CLIENTAGENT_FILE_TIMEOUT        one file's download, request to last byte (Go duration)  default 2m
//	CLIENTAGENT_FILE_MIN_RATE       the slowest download, bytes per second (0: no minimum)   default 8KiB
//	CLIENTAGENT_FILE_RATE_WINDOW    the window the rate is measured over (Go duration)       default 10s
func FilesFromEnv(getenv func(string) string) (Files, error) {
	f := Files{Quota: DefaultConversationQuota, Limits: files.Limits{MaxBytes: files.DefaultMaxBytes,
		Timeout: files.DefaultTimeout, MinRate: files.DefaultMinRate, RateWindow: files.DefaultRateWindow}}
	sizes := []struct {
		name   string
		p      *int64
		zeroOK bool
		zeroIs int64 // what 0 means: none
	}{
		{"CLIENTAGENT_CONVERSATION_QUOTA", &f.Quota, true, 0},
		{"CLIENTAGENT_MAX_FILE_SIZE", &f.Limits.MaxBytes, false, 0},
		{"CLIENTAGENT_FILE_MIN_RATE", &f.Limits.MinRate, true, -1},
	}
	for _, s := range sizes {
		v := getenv(s.name)
		if v == "" {
			continue
		}
		n, err := ParseBytes(v)
		if err != nil || n == 0 && !s.zeroOK {
			return f, fmt.Errorf("%s=%q: want a positive size in bytes, e.g. 1048576, 512KiB, 100MiB or 1GiB", s.name, v)
		}
		if n == 0 {
			n = s.zeroIs
		}
		*s.p = n
	}
	for name, p := range map[string]*time.Duration{"CLIENTAGENT_FILE_TIMEOUT": &f.Limits.Timeout, "CLIENTAGENT_FILE_RATE_WINDOW": &f.Limits.RateWindow} {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return f, fmt.Errorf("%s=%q: want a positive Go duration, e.g. 30s or 2m", name, v)
			}
			*p = d
		}
	}
	return f, nil
}

// ParseBytes reads a size: a whole number of bytes, optionally with a
// binary unit (KiB, MiB, GiB; K, M, G and KB, MB, GB mean the same).
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToUpper(strings.TrimSpace(s[len(num):]))
	mult := map[string]int64{"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
		"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || mult == 0 || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return n * mult, nil
}

// WithQuota bounds arts to the quota per conversation, counted in rdb
// beside the conversation record (its keys expire with it).
func (f Files) WithQuota(arts artifact.Store, rdb redis.UniversalClient, idleTTL time.Duration) artifact.Store {
	if f.Quota <= 0 {
		return arts
	}
	return artifact.WithQuota(arts, valkey.New(rdb, valkey.Options{IdleTTL: idleTTL}).Usage(), f.Quota)
}
