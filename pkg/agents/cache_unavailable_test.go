package agents

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
)

// A capability cache that does not answer is record.ErrUnavailable, so the
// API answers 503 store_unavailable (and the client retries), not 500.
func TestCapabilitiesCacheUnavailable(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1 (a port a test's listener never gets,
	// unlike a free one probed and closed, which another may take).
	addr := "127.0.0.1:1"
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	cs := newCardServer(t, "paint")
	reg := NewRegistry(RegistryOptions{URLs: []string{cs.URL}, Redis: rdb})
	_, err := reg.Capabilities(t.Context())
	if !errors.Is(err, record.ErrUnavailable) {
		t.Errorf("Capabilities() with the cache down = %v, want record.ErrUnavailable", err)
	}
}
