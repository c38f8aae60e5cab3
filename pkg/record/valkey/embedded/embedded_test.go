package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/record/valkey/embedded"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, closeFn, err := embedded.Open(ctx)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer closeFn()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("Ping() = %v", err)
	}
	// The store works on it as on Valkey.
	if _, err := valkey.New(c, valkey.Options{}).List(ctx, "nobody"); err != nil {
		t.Errorf("Store.List() on the embedded server = %v", err)
	}
	// Keys expire in real time, as in Valkey (a conversation's idle TTL).
	if err := c.Set(ctx, "short", "x", 150*time.Millisecond).Err(); err != nil {
		t.Fatalf("SET PX = %v", err)
	}
	for n := c.Exists(ctx, "short").Val(); n != 0; n = c.Exists(ctx, "short").Val() {
		if ctx.Err() != nil {
			t.Fatalf("key with a 150 ms TTL still exists after %v", 5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// valkey.Open and valkey.NewClient no longer start a server for an empty
// URL: that is this package's job, so Lambda binaries do not link it.
func TestValkeyNeedsURL(t *testing.T) {
	t.Parallel()
	if _, _, err := valkey.Open(t.Context(), ""); !errors.Is(err, valkey.ErrNoURL) {
		t.Errorf("valkey.Open(\"\") = %v, want ErrNoURL", err)
	}
	if _, err := valkey.NewClient(""); !errors.Is(err, valkey.ErrNoURL) {
		t.Errorf("valkey.NewClient(\"\") = %v, want ErrNoURL", err)
	}
}
