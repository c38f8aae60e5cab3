package mcp

import (
	"context"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Watch keeps one session open per server, where a process can keep one
// (the local stack; a Lambda function cannot), and lists a server's tools
// again whenever it sends notifications/tools/list_changed, and whenever
// its session is opened again after it was lost. changed is called after
// each such refresh (the platform drops its built catalog). A lost session
// is reopened with a growing pause (1 s to 30 s). stop closes the sessions
// and waits for them.
func (s *Source) Watch(changed func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, sc := range s.servers {
		if sc.Unusable != nil {
			continue // nothing to keep open: it cannot be configured
		}
		wg.Go(func() { s.watch(ctx, sc, changed) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

func (s *Source) watch(ctx context.Context, sc ServerConfig, changed func()) {
	refresh := func() {
		rctx, cancel := context.WithTimeout(ctx, s.fetchTimeout+5*time.Second)
		defer cancel()
		if err := s.refreshServer(rctx, sc.Name); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "MCP tool list refresh failed", "server", sc.Name, "err", err)
		}
		if changed != nil {
			changed()
		}
	}
	notify := make(chan struct{}, 1)
	opts := &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
		select {
		case notify <- struct{}{}:
		default:
		}
	}}
	pause := time.Second
	for first := true; ctx.Err() == nil; first = false {
		cctx, cancel := context.WithTimeout(ctx, s.fetchTimeout)
		cs, err := connect(cctx, sc, s.hc, opts, true)
		cancel()
		if err != nil {
			s.log.DebugContext(ctx, "MCP watch session not open", "server", sc.Name, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
			continue
		}
		pause = time.Second
		if !first {
			// The list may have changed while the session was lost.
			refresh()
		}
		done := make(chan struct{})
		go func() {
			_ = cs.Wait()
			close(done)
		}()
	session:
		for {
			select {
			case <-ctx.Done():
				_ = cs.Close()
				<-done
				return
			case <-done:
				break session
			case <-notify:
				refresh()
			}
		}
	}
}
