package livepub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/clientagent/clientagent/pkg/awssign"
	"github.com/clientagent/clientagent/pkg/livepub"
	"github.com/clientagent/clientagent/pkg/livepub/livepubtest"
	"github.com/clientagent/clientagent/pkg/livesub"
	"github.com/clientagent/clientagent/pkg/record"
)

type owners map[string]string

func (o owners) Owner(_ context.Context, cid string) (string, error) {
	if u, ok := o[cid]; ok {
		return u, nil
	}
	return "", record.ErrNotFound
}

var creds = aws.Credentials{AccessKeyID: "AKIDFAKE", SecretAccessKey: "secret"}

// tokens are "tok-<user>" for the fake's verifier.
func verify(tok string) (string, error) {
	u, ok := strings.CutPrefix(tok, "tok-")
	if !ok {
		return "", errors.New("bad token")
	}
	return u, nil
}

func publisher(t *testing.T, f *livepubtest.Fake, c aws.Credentials, o owners) *livepub.Publisher {
	cfg := f.Config()
	p := &livepub.Publisher{Endpoint: cfg.PublishURL(), Owners: o,
		Client: awssign.Client(nil, credentials.StaticCredentialsProvider{Value: c}, "us-east-1", livepub.SigV4Service)}
	return p.Start(t.Context())
}

func subscribe(t *testing.T, f *livepubtest.Fake, user, channel string) (*livesub.Subscription, error) {
	cfg := f.Config()
	s, err := livesub.Subscribe(t.Context(), cfg.RealtimeURL(), livesub.Auth{Host: cfg.Host(), Authorization: "tok-" + user}, channel)
	if err == nil {
		t.Cleanup(s.Close)
	}
	return s, err
}

// The publisher's events reach the owner's subscription in order, in
// batches of at most 5; another user's subscription to the same channel,
// a bad token and a publish signed with other credentials are refused.
func TestPublishAndSubscribeThroughTheFake(t *testing.T) {
	t.Parallel()
	f := livepubtest.New(t, verify, creds)
	ch, ok := livepub.Channel(livepub.DefaultNamespace, "alice", "c1")
	if !ok || ch != "/live/alice/c1" {
		t.Fatalf("Channel = %q %v", ch, ok)
	}
	s, err := subscribe(t, f, "alice", ch)
	if err != nil {
		t.Fatalf("owner's subscribe: %v", err)
	}
	var refused *livesub.RefusedError
	if _, err := subscribe(t, f, "bob", ch); !errors.As(err, &refused) || refused.Step != "subscribe" {
		t.Fatalf("bob's subscribe to alice's channel = %v, want a refused subscription", err)
	}
	if _, err := subscribe(t, f, "bob", "/live/bob/*"); err != nil {
		t.Fatalf("bob's own channels: %v", err)
	}
	cfg := f.Config()
	if _, err := livesub.Subscribe(t.Context(), cfg.RealtimeURL(), livesub.Auth{Host: cfg.Host(), Authorization: "forged"}, ch); !errors.As(err, &refused) || refused.Step != "connection" {
		t.Fatalf("bad token = %v, want a refused connection", err)
	}

	p := publisher(t, f, creds, owners{"c1": "alice"})
	const n = 12
	for i := range n {
		p.Publish(t.Context(), "c1", record.Event{Type: record.EventLLMDelta, TurnID: "t1", At: time.Now(), Data: map[string]any{"offset": i}})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case raw, ok := <-s.Events:
			if !ok {
				t.Fatalf("subscription ended after %d events: %v", i, s.Err())
			}
			var e record.Event
			if err := json.Unmarshal(raw, &e); err != nil || e.Data["offset"] != float64(i) {
				t.Fatalf("event %d = %s (%v)", i, raw, err)
			}
		case <-ctx.Done():
			t.Fatalf("got %d of %d events", i, n)
		}
	}
	if st := p.Stats(); st != (livepub.Stats{Published: n}) {
		t.Fatalf("stats = %+v", st)
	}

	// Other credentials: refused by the API, counted, and the step is
	// never told.
	bad := publisher(t, f, aws.Credentials{AccessKeyID: "AKIDFAKE", SecretAccessKey: "wrong"}, owners{"c1": "alice"})
	bad.Publish(t.Context(), "c1", record.Event{Type: record.EventTurnEnded, TurnID: "t1", At: time.Now()})
	if err := bad.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := bad.Stats(); st.Failed != 1 || st.Published != 0 {
		t.Fatalf("stats with bad credentials = %+v, want 1 failed", st)
	}
	if r := f.Refused(); !strings.Contains(fmt.Sprint(r), "signature does not match") {
		t.Fatalf("refusals = %q", r)
	}
}

// An unreachable API, an unknown owner and a full queue never block
// Publish; they are counted.
func TestPublishNeverBlocks(t *testing.T) {
	t.Parallel()
	p := (&livepub.Publisher{Endpoint: "http://127.0.0.1:1/event", Owners: owners{"c1": "alice"}, Queue: 4, Timeout: time.Second}).Start(t.Context())
	start := time.Now()
	for range 100 {
		p.Publish(t.Context(), "c1", record.Event{Type: record.EventStepStarted, TurnID: "t1", At: time.Now()})
	}
	p.Publish(t.Context(), "nobody", record.Event{Type: record.EventStepStarted, TurnID: "t1", At: time.Now()})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Publish took %v", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Published != 0 || st.Failed+st.Dropped != 101 || st.Dropped == 0 {
		t.Fatalf("stats = %+v, want all 101 failed or dropped, some dropped", st)
	}
}

func TestChannelRefusesUnsafeSegments(t *testing.T) {
	if ch, ok := livepub.Channel("live", "alice", "c_7b25"); !ok || ch != "/live/alice/c-7b25" {
		t.Errorf("Channel(c_7b25) = %q %v, want /live/alice/c-7b25", ch, ok)
	}
	for _, tc := range []struct{ owner, cid string }{
		{"a/b", "c1"}, {"", "c1"}, {"alice", "c 1"}, {strings.Repeat("x", 51), "c1"}, {"user@example.com", "c1"},
		{"alice", "c-1"}, // would collide with c_1's segment
	} {
		if ch, ok := livepub.Channel("live", tc.owner, tc.cid); ok {
			t.Errorf("Channel(%q, %q) = %q, want none", tc.owner, tc.cid, ch)
		}
	}
}

// An event larger than AppSync takes (240 KB) is published as a resync
// naming its turn, so the client re-reads the turn instead of missing it.
func TestTooLargeEventBecomesResync(t *testing.T) {
	t.Parallel()
	f := livepubtest.New(t, verify, creds)
	ch, _ := livepub.Channel(livepub.DefaultNamespace, "alice", "c1")
	s, err := subscribe(t, f, "alice", ch)
	if err != nil {
		t.Fatal(err)
	}
	p := publisher(t, f, creds, owners{"c1": "alice"})
	p.Publish(t.Context(), "c1", record.Event{Type: record.EventLLMDelta, TurnID: "t7", At: time.Now(), Data: map[string]any{"text": strings.Repeat("x", livepub.MaxEventSize)}})
	select {
	case raw := <-s.Events:
		var e record.Event
		if err := json.Unmarshal(raw, &e); err != nil || e.Type != livepub.EventResync || e.TurnID != "t7" || len(raw) > 1024 {
			t.Fatalf("event = %.200s (%v), want a small resync of t7", raw, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
	}
}
