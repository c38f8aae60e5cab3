package devstack

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// Issue 29, lever 6: turns watched the way the page watches one (open the
// conversation's event stream, post the message, close the stream at
// turn.ended), 20 at a time. A stream whose client has gone releases its
// reader at once, and a waiting reader holds no connection: promptly after
// the burst no client is blocked on the server and the stack's connections
// to Valkey are back to what the same burst unwatched left (the one
// Pub/Sub connection of the wake-ups aside). Before, each abandoned stream
// sat in an XREAD BLOCK for up to its 15 s heartbeat, on a pool of its own.
func TestAbandonedStreamsReleaseAtOnce(t *testing.T) {
	t.Parallel()
	addr, _ := valkeytest.Server(t)
	st, c := stack(t, nil, func(cfg *Config) {
		cfg.ValkeyURL = "redis://" + addr + "/0"
		cfg.MaxStreams = 100 // one user watches every turn of the burst
	})
	srv := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = srv.Close() })
	const conc, rounds, slack = 20, 2, 15 // slack: other pools grow a little under load; 40 held streams would be 40 more
	const text = "Create a PNG image with the word Popelnase"

	burst := func(watched bool) {
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				cid := c.newConversation()
				if !watched {
					if v := c.wait(cid, c.send(cid, text)); v.Status != "succeeded" {
						t.Errorf("turn = %s", v.Status)
					}
					return
				}
				ch, resp := c.events(cid, "", "")
				tid := c.send(cid, text)
				got := until(t, ch, tid, "turn.ended")
				resp.Body.Close() // the page leaves at turn.ended
				if len(got) == 0 || got[len(got)-1].Type != "turn.ended" {
					t.Errorf("stream of %s ended without turn.ended", tid)
				}
			})
		}
		wg.Wait()
	}
	pool := func() (total, inUse int) {
		s := st.Redis.PoolStats()
		return int(s.TotalConns), int(s.TotalConns - s.IdleConns)
	}

	burst(false) // warms every pool of the stack to this concurrency
	base := serverInfo(t, srv, "connected_clients")
	basePool, _ := pool()
	for range rounds {
		burst(true)
	}
	deadline := time.Now().Add(8 * time.Second) // "at once", with room for a loaded CI machine; the old readers held on for their 15 s heartbeat
	for {
		blocked := serverInfo(t, srv, "blocked_clients")
		total, inUse := pool()
		// The platform's pool may have grown by the streams' own reads
		// (idle now), the other clients' pools (engine, specialists) by a
		// few under a faster burst; a held stream would be one each.
		allowed := base + 1 + (total - basePool) + slack
		conns := serverInfo(t, srv, "connected_clients")
		if blocked == 0 && inUse <= 1 && conns <= allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("8 s after %d watched turns: %d clients blocked on the server (want 0), %d of the platform's connections in use (want ≤ 1, the Pub/Sub one), %d connections (want ≤ %d)",
				conc*rounds, blocked, inUse, conns, allowed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serverInfo reads one field of the server's INFO clients (minus this
// client's own connection for connected_clients).
func serverInfo(t *testing.T, c *redis.Client, field string) int {
	t.Helper()
	info, err := c.Info(t.Context(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			if field == "connected_clients" {
				n--
			}
			return n
		}
	}
	t.Fatalf("INFO clients has no %s", field)
	return 0
}
