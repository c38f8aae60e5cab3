package devstack

// Issue 27, point 1: live events through an AppSync Events API (the
// in-process wire-compatible fake). The stack publishes every event of the
// log to the owner's channel; a client subscribed over the WebSocket gets
// the turn's events in the order the event stream has them; another user
// cannot subscribe to that channel.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/chatcli"
	"github.com/clientagent/clientagent/pkg/livepub"
	"github.com/clientagent/clientagent/pkg/livepub/livepubtest"
	"github.com/clientagent/clientagent/pkg/livesub"
	"github.com/clientagent/clientagent/pkg/smoke"
)

func TestLiveEventsThroughAppSyncEvents(t *testing.T) {
	t.Parallel()
	st, c, fake := appsyncStack(t, func(cfg *Config) {
		cfg.ChunkDelay = 10 * time.Millisecond
	})

	var info api.Info
	if code := c.do("GET", "/v1/info", nil, &info); code != http.StatusOK || info.Events == nil || info.Events.Delivery != "appsync" ||
		info.Events.ChannelPrefix != "/live/dev/" || info.Events.RealtimeURL != fake.Config().RealtimeURL() {
		t.Fatalf("GET /v1/info = %d %+v, want delivery appsync on the fake, channel prefix /live/dev/", code, info.Events)
	}
	cid := c.newConversation()
	seg, _ := livepub.ConversationSegment(cid)
	auth := func(tok string) livesub.Auth { return livesub.Auth{Host: info.Events.Host, Authorization: tok} }
	sub, err := livesub.Subscribe(t.Context(), info.Events.RealtimeURL, auth(c.token), info.Events.ChannelPrefix+seg)
	if err != nil {
		t.Fatalf("owner's subscription: %v", err)
	}
	defer sub.Close()
	mallory := c.as("mallory", st)
	var refused *livesub.RefusedError
	if _, err := livesub.Subscribe(t.Context(), info.Events.RealtimeURL, auth(mallory.token), info.Events.ChannelPrefix+seg); !errors.As(err, &refused) || refused.Step != "subscribe" {
		t.Fatalf("another user's subscription to the owner's channel = %v, want it refused", err)
	}

	sse, _ := c.events(cid, "", "")
	tid := c.send(cid, "Create a PNG image with the word Popelnase")
	want := until(t, sse, tid, "turn.ended")
	if v := c.wait(cid, tid); v.Status != "succeeded" {
		t.Fatalf("turn = %s %q", v.Status, v.Reply)
	}

	// The WebSocket's events are the stream's, in its order, with the
	// same data.
	var got []map[string]any
	deadline := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case raw, ok := <-sub.Events:
			if !ok {
				t.Fatalf("subscription ended after %d of %d events: %v", len(got), len(want), sub.Err())
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("event %s: %v", raw, err)
			}
			got = append(got, m)
		case <-deadline:
			t.Fatalf("got %d of the stream's %d events over the WebSocket", len(got), len(want))
		}
	}
	for i, w := range want {
		g := got[i]
		if g["type"] != w.Type || g["turn_id"] != tid || !jsonEqual(g, w.Data) {
			t.Fatalf("WebSocket event %d = %v, want the stream's %s %v", i, g, w.Type, w.Data)
		}
	}
	types := make([]string, len(got))
	for i, g := range got {
		types[i], _ = g["type"].(string)
	}
	if types[0] != "turn.started" || types[len(types)-1] != "turn.ended" || !slices.Contains(types, "llm.delta") || !slices.Contains(types, "artifact") {
		t.Errorf("WebSocket event types = %v, want turn.started … deltas, artifacts … turn.ended", types)
	}
	for _, p := range fake.Published() {
		if p.Channel != "/live/dev/"+seg && p.Channel != "/live/dev/user" {
			t.Errorf("published to %s, want only the owner's channels", p.Channel)
		}
	}
}

// Issue 28 on AWS: the conversation list's changes reach the owner's own
// channel (/live/<sub>/user), a conversation created, renamed and deleted
// elsewhere included, and no one else may subscribe to it.
func TestUserEventsThroughAppSyncEvents(t *testing.T) {
	t.Parallel()
	st, c, _ := appsyncStack(t)
	var info api.Info
	if code := c.do("GET", "/v1/info", nil, &info); code != http.StatusOK || info.Events == nil || info.Events.Delivery != "appsync" {
		t.Fatalf("GET /v1/info = %d %+v, want delivery appsync", code, info.Events)
	}
	auth := func(tok string) livesub.Auth { return livesub.Auth{Host: info.Events.Host, Authorization: tok} }
	channel := info.Events.ChannelPrefix + livesub.UserSegment
	sub, err := livesub.Subscribe(t.Context(), info.Events.RealtimeURL, auth(c.token), channel)
	if err != nil {
		t.Fatalf("owner's subscription to %s: %v", channel, err)
	}
	defer sub.Close()
	var refused *livesub.RefusedError
	if _, err := livesub.Subscribe(t.Context(), info.Events.RealtimeURL, auth(c.as("mallory", st).token), channel); !errors.As(err, &refused) {
		t.Fatalf("another user's subscription to %s = %v, want it refused", channel, err)
	}
	cid := c.newConversation()
	if code := c.do("PATCH", "/v1/conversations/"+cid, map[string]any{"title": "Renamed on AWS"}, nil); code != http.StatusOK {
		t.Fatalf("rename = %d", code)
	}
	if code := c.do("DELETE", "/v1/conversations/"+cid, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete = %d", code)
	}
	want := []string{"conversation.created", "conversation.renamed", "conversation.deleted"}
	var got []string
	for deadline := time.After(30 * time.Second); len(got) < len(want); {
		select {
		case raw, ok := <-sub.Events:
			if !ok {
				t.Fatalf("subscription ended after %v: %v", got, sub.Err())
			}
			var ev struct {
				Type           string `json:"type"`
				ConversationID string `json:"conversation_id"`
			}
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatalf("event %s: %v", raw, err)
			}
			if ev.ConversationID != cid {
				t.Errorf("event %s is not of %s", raw, cid)
			}
			got = append(got, ev.Type)
		case <-deadline:
			t.Fatalf("user channel events within 30 s = %v, want %v", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("user channel events = %v, want %v", got, want)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The CLI follows a turn over the AppSync Events WebSocket when GET
// /v1/info names one: a form asked at the prompt, the reply shown, and
// every turn subscribed on the owner's channel.
func TestChatCLIOverAppSyncEvents(t *testing.T) {
	t.Parallel()
	_, c, fake := appsyncStack(t)
	in := strings.NewReader("Create a PNG image with the word Popelnase\nDesign a valve flange with 4 holes\nbrass\n/quit\n")
	var out bytes.Buffer
	if err := chatcli.Run(t.Context(), chatcli.Options{BaseURL: c.base, Token: c.token, In: in, Out: &out, OutDir: t.TempDir(), PollInterval: time.Hour}); err != nil {
		t.Fatalf("Run() = %v\n%s", err, out.String())
	}
	for _, want := range []string{"create_svg_artifact succeeded", "convert_svg_to_png succeeded", "material", "design_valve"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	subs := fake.Subscribed()
	if len(subs) < 2 {
		t.Fatalf("subscriptions %v, want one per turn at least", subs)
	}
	for _, ch := range subs {
		if !strings.HasPrefix(ch, "/live/dev/c-") {
			t.Errorf("subscribed to %s, want the owner's channel", ch)
		}
	}
}

// `make smoke` checks the delivery the deployment names: against a stack
// that publishes to the AppSync Events fake, its live-events step reads
// the turn over the WebSocket.
func TestSmokeChecksAppSyncDelivery(t *testing.T) {
	t.Parallel()
	st, c, fake := appsyncStack(t)
	var out bytes.Buffer
	res, err := smoke.Run(t.Context(), smoke.Config{URL: st.URL(), Token: c.token, Out: &out, TurnTimeout: 30 * time.Second})
	if err != nil || res.Failed != 0 || !strings.Contains(out.String(), "over AppSync Events "+fake.Config().RealtimeURL()) {
		t.Fatalf("smoke = %+v, %v, want the live step over AppSync Events:\n%s", res, err, out.String())
	}
	if len(fake.Subscribed()) == 0 {
		t.Errorf("smoke never subscribed")
	}
}

// appsyncStack is a local stack that publishes its live events to an
// in-process fake of AppSync Events, whose subscribers sign in with the
// stack's own tokens.
func appsyncStack(t *testing.T, opts ...func(*Config)) (*Stack, *client, *livepubtest.Fake) {
	t.Helper()
	creds := aws.Credentials{AccessKeyID: "AKIDSTEPS", SecretAccessKey: "steps-secret"}
	var st *Stack
	fake := livepubtest.New(t, func(tok string) (string, error) {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return st.auth.Subject(r)
	}, creds)
	st, c := stack(t, nil, append(opts, func(cfg *Config) {
		cfg.Live = &Live{Config: fake.Config(), Credentials: credentials.StaticCredentialsProvider{Value: creds}}
	})...)
	return st, c, fake
}
