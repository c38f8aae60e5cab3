package valkey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// gate is a hook under together that holds the scripts on keys starting
// with "gate:" until released, so a test can keep together's round trips
// busy; it also records the pipelines that reach the server.
type gate struct {
	arrived chan struct{}
	release chan struct{}
	fail    error // what the held scripts end with, when set: the store gone

	mu        sync.Mutex
	pipelines [][]string // each pipeline's commands' first keys
}

func newGate() *gate {
	return &gate{arrived: make(chan struct{}, 64), release: make(chan struct{})}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if k := firstKey(cmd); len(k) > 5 && k[:5] == "gate:" {
			g.arrived <- struct{}{}
			<-g.release
			if g.fail != nil {
				return g.fail
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		keys := make([]string, len(cmds))
		for i, c := range cmds {
			keys[i] = firstKey(c)
		}
		g.mu.Lock()
		g.pipelines = append(g.pipelines, keys)
		g.mu.Unlock()
		return next(ctx, cmds)
	}
}

// firstKey is a script command's first key: EVAL/EVALSHA body numkeys key…
func firstKey(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 4 || !isScript(cmd) {
		return ""
	}
	k, _ := args[3].(string)
	return k
}

// holding is a client with together over a gate, and inFlight gated scripts
// holding every round trip of together (release them with close(g.release)
// and wait for wg); fail, when set, is what the held scripts end with.
type holding struct {
	id string
	tg *together
	g  *gate
	wg *sync.WaitGroup
}

// holdAll hooks together and a gate on c, starts inFlight gated scripts
// and returns once together counts them all on their way.
func holdAll(t *testing.T, c redis.UniversalClient, fail error) holding {
	t.Helper()
	h := holding{id: valkeytest.ID(t, "together"), tg: &together{c: c}, g: newGate(), wg: &sync.WaitGroup{}}
	h.g.fail = fail
	c.AddHook(h.tg)
	c.AddHook(h.g)
	held := redis.NewScript("return 1")
	for i := range inFlight {
		h.wg.Go(func() {
			if err := held.Run(context.Background(), c, []string{fmt.Sprintf("gate:%s:%d", h.id, i)}).Err(); err != nil && fail == nil {
				t.Errorf("held script: %v", err)
			}
		})
	}
	for range inFlight {
		select {
		case <-h.g.arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("the held scripts never reached the server's side of together")
		}
	}
	return h
}

// waitQueued waits until n scripts wait in tg's queue.
func waitQueued(t *testing.T, tg *together, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tg.mu.Lock()
		q := len(tg.queue)
		tg.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d scripts queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Scripts that come while the round trips are busy wait, then go to the
// server together in one pipeline, and each caller gets its own reply: a
// result, or its own script's error. A script the server does not know yet
// (NOSCRIPT in the pipeline) is sent again with its body, as alone.
func TestScriptsThatComeAtOnceGoTogether(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		h := holdAll(t, c, nil)
		id, tg, g, held := h.id, h.tg, h.g, h.wg
		// A body of its own: the server has never seen this script.
		add := redis.NewScript(fmt.Sprintf("-- %s\nif ARGV[1] == 'fail' then return redis.error_reply('ERR refused') end\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])", id))
		const n = 10
		results := make([]*redis.Cmd, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				arg := any(i + 1)
				if i == 3 {
					arg = "fail"
				}
				results[i] = add.Run(context.Background(), c, []string{"sum:" + id}, arg)
			})
		}
		waitQueued(t, tg, n)
		close(g.release)
		held.Wait()
		wg.Wait()

		want := int64(0)
		for i, r := range results {
			if i == 3 {
				if err := r.Err(); err == nil || err.Error() != "ERR refused" {
					t.Errorf("the failing script's caller got %v, want its own error ERR refused", err)
				}
				continue
			}
			if err := r.Err(); err != nil {
				t.Errorf("script %d: %v", i, err)
			}
			want += int64(i + 1)
		}
		if got, err := c.Get(context.Background(), "sum:"+id).Int64(); err != nil || got != want {
			t.Errorf("sum = %d, %v; want %d: every script ran once", got, err, want)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		var sizes []int
		for _, p := range g.pipelines {
			if p[0] == "sum:"+id { // not a connection's handshake
				sizes = append(sizes, len(p))
			}
		}
		if len(sizes) == 0 || sizes[0] != n {
			t.Fatalf("pipelines of the queued scripts: %v; want the first to carry all %d", sizes, n)
		}
	})
}

// A script whose caller gives up while it waits for a round trip is never
// sent; the others go as they would have.
func TestAScriptWhoseCallerLeavesIsNotSent(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		h := holdAll(t, c, nil)
		id, tg, g, held := h.id, h.tg, h.g, h.wg

		incr := redis.NewScript("return redis.call('INCR', KEYS[1])")
		ctx, cancel := context.WithCancel(context.Background())
		left := make(chan error, 1)
		go func() { left <- incr.Run(ctx, c, []string{"left:" + id}).Err() }()
		stayed := make(chan error, 1)
		go func() { stayed <- incr.Run(context.Background(), c, []string{"stayed:" + id}).Err() }()
		waitQueued(t, tg, 2)
		cancel()
		if err := <-left; !errors.Is(err, context.Canceled) {
			t.Errorf("the caller that left got %v, want context.Canceled", err)
		}
		waitQueued(t, tg, 1)
		close(g.release)
		held.Wait()
		if err := <-stayed; err != nil {
			t.Errorf("the caller that stayed: %v", err)
		}
		bg := context.Background()
		if n, _ := c.Exists(bg, "left:"+id).Result(); n != 0 {
			t.Errorf("the script whose caller left ran")
		}
		if v, _ := c.Get(bg, "stayed:"+id).Int(); v != 1 {
			t.Errorf("the script that stayed ran %d times, want 1", v)
		}
	})
}

// Other commands never wait behind scripts: a GET goes while every round
// trip of scripts is busy.
func TestOtherCommandsDoNotWaitForScripts(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		h := holdAll(t, c, nil)
		id, g, held := h.id, h.g, h.wg
		defer held.Wait()
		defer close(g.release)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Get(ctx, "none:"+id).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET while scripts hold every round trip: %v, want redis.Nil at once", err)
		}
	})
}

// When the round trip ahead of them finds the store gone (a timeout, a
// lost connection), the scripts queued behind it fail at once with its
// error, unsent, instead of trying the store one batch after another.
func TestScriptsQueuedBehindAnUnreachableStoreFailUnsent(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		h := holdAll(t, c, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
		id, tg, g, held := h.id, h.tg, h.g, h.wg

		incr := redis.NewScript("return redis.call('INCR', KEYS[1])")
		const n = 3
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- incr.Run(context.Background(), c, []string{fmt.Sprintf("queued:%s:%d", id, i)}).Err() }()
		}
		waitQueued(t, tg, n)
		close(g.release)
		for range n {
			if err := <-errs; !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("a script queued behind a timed-out round trip got %v, want its timeout", err)
			}
		}
		held.Wait()
		for i := range n {
			if k, _ := c.Exists(context.Background(), fmt.Sprintf("queued:%s:%d", id, i)).Result(); k != 0 {
				t.Errorf("queued script %d ran", i)
			}
		}
		// The store is back: the next script goes, alone.
		g.fail = nil
		if err := incr.Run(context.Background(), c, []string{"after:" + id}).Err(); err != nil {
			t.Errorf("the first script after the outage: %v", err)
		}
		tg.mu.Lock()
		defer tg.mu.Unlock()
		if tg.busy != 0 || len(tg.queue) != 0 {
			t.Errorf("after the outage: %d round trips busy, %d queued; want none", tg.busy, len(tg.queue))
		}
	})
}

// BenchmarkScriptsAtOnce is twenty goroutines each running a small
// script that writes a 2 KB value (a step's write, in miniature) against
// the server at VALKEY_URL: each script its own round trip ("alone"), and
// scripts that come at once sharing round trips ("together", NewClient's).
func BenchmarkScriptsAtOnce(b *testing.B) {
	url := os.Getenv("VALKEY_URL")
	if url == "" {
		b.Skip("set VALKEY_URL to a Valkey or Redis server")
	}
	body := strings.Repeat("x", 2<<10)
	write := redis.NewScript("redis.call('HSET', KEYS[1], 'body', ARGV[1]) return redis.call('HLEN', KEYS[1])")
	for _, name := range []string{"alone", "together"} {
		b.Run(name, func(b *testing.B) {
			o, err := redis.ParseURL(url)
			if err != nil {
				b.Fatal(err)
			}
			o.Dialer = Dialer(o)
			c := redis.NewClient(o)
			defer c.Close()
			if name == "together" {
				SendScriptsTogether(c)
			}
			b.SetParallelism(10) // twenty goroutines on two processors
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench:together:%d", n.Add(1))
				for pb.Next() {
					if err := write.Run(context.Background(), c, []string{key}, body).Err(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
