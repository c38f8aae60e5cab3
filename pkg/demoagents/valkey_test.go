package demoagents

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// twoInstances is two separate demo-agent servers sharing one Valkey, as
// two Lambda instances of functions/demoagents would.
func twoInstances(t *testing.T, opts Options) (a, b *stack, mr *miniredis.Miniredis) {
	t.Helper()
	mr = miniredis.RunT(t)
	open := func() redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	optsA, optsB := opts, opts
	optsA.Redis, optsB.Redis = open(), open()
	return newStackWith(t, optsA), newStackWith(t, optsB), mr
}

func flangeAnswer(first *a2a.Task) *a2a.Message {
	answer := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"outer_diameter_mm": 1200}})
	answer.ID = "call_fl-answer"
	answer.TaskID = first.ID
	answer.ContextID = first.ContextID
	answer.Metadata = map[string]any{"inputSources": map[string]any{"outer_diameter_mm": "user"}}
	return answer
}

// docs/design.md §3.5: the answer to INPUT_REQUIRED continues the same task, and on
// Lambda it may reach another instance than the one that paused it.
func TestInputRequiredContinuesOnAnotherInstance(t *testing.T) {
	t.Parallel()
	a, b, mr := twoInstances(t, Options{})

	first := send(t, a.client(t, PathFlange), "call_fl", map[string]any{"holes": 24, "outer_diameter_mm": 200, "material": "steel"})
	wantState(t, first, a2a.TaskStateInputRequired)

	cb := b.client(t, PathFlange)
	done := sendMessage(t, cb, flangeAnswer(first))
	wantState(t, done, a2a.TaskStateCompleted)
	if done.ID != first.ID || done.ContextID != first.ContextID {
		t.Errorf("answer task = %s/%s, want same task %s/%s", done.ID, done.ContextID, first.ID, first.ContextID)
	}
	// holes and material come from the first message, which instance A got.
	d := statusData(done)
	if d["holes"] != float64(24) || d["material"] != "steel" || d["outer_diameter_mm"] != float64(1200) {
		t.Errorf("result data = %v, want merged arguments", d)
	}
	files := taskFiles(t, done)
	if len(files) != 1 || files[0].name != "flange_24x1200_steel.svg" {
		t.Fatalf("files = %+v, want flange_24x1200_steel.svg", files)
	}

	// Either instance serves tasks/get with the finished task and its file.
	got, err := a.client(t, PathFlange).GetTask(t.Context(), &a2a.TaskQueryParams{ID: first.ID})
	if err != nil {
		t.Fatalf("GetTask(on A) error = %v", err)
	}
	wantState(t, got, a2a.TaskStateCompleted)
	if diff := cmp.Diff(files, taskFiles(t, got), cmp.AllowUnexported(gotFile{})); diff != "" {
		t.Errorf("GetTask(on A) files mismatch (-want +got):\n%s", diff)
	}

	// A finished task cannot be continued, on any instance.
	if _, err := a.client(t, PathFlange).SendMessage(t.Context(), &a2a.MessageSendParams{Message: flangeAnswer(first)}); err == nil {
		t.Errorf("SendMessage(continue completed task) error = nil, want an error")
	}

	// Finished tasks expire instead of piling up.
	mr.FastForward(24*time.Hour + time.Second)
	if _, err := cb.GetTask(t.Context(), &a2a.TaskQueryParams{ID: first.ID}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("GetTask(after TTL) error = %v, want task not found", err)
	}
}

// Without Valkey each instance has its own tasks: the control case that
// shows what the test above guards against.
func TestInputRequiredOnAnotherInstanceWithoutValkey(t *testing.T) {
	t.Parallel()
	a, b := newStack(t), newStack(t)
	first := send(t, a.client(t, PathFlange), "call_fl", map[string]any{"holes": 24, "outer_diameter_mm": 200, "material": "steel"})
	wantState(t, first, a2a.TaskStateInputRequired)
	_, err := b.client(t, PathFlange).SendMessage(t.Context(), &a2a.MessageSendParams{Message: flangeAnswer(first)})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("SendMessage(on B, memory store) error = %v, want task not found", err)
	}
}

// docs/design.md §3.4: a retried call must not repeat an irreversible effect, even
// when the retry reaches another instance.
func TestPublishOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b, _ := twoInstances(t, Options{})
	fp := a.put("art_pub", "Popelnase.png", "image/png", []byte("png bytes"))
	args := map[string]any{"artifact_id": "art_pub", "channel": "web"}

	first := send(t, a.client(t, PathPublish), "call_p1", args, fp)
	wantState(t, first, a2a.TaskStateCompleted)
	// A retried call carries a freshly signed link; here, one on B's origin
	// (each instance fetches only from public addresses and its own origin).
	fp = b.put("art_pub", "Popelnase.png", "image/png", []byte("png bytes"))
	retry := send(t, b.client(t, PathPublish), "call_p1", args, fp)
	wantState(t, retry, a2a.TaskStateCompleted)
	if !strings.Contains(statusText(retry), "already published") {
		t.Errorf("retry text = %q, want it to say the call was already published", statusText(retry))
	}
	if statusData(retry)["publication_id"] != statusData(first)["publication_id"] {
		t.Errorf("retry publication = %v, want the first one %v", statusData(retry)["publication_id"], statusData(first)["publication_id"])
	}
	other := send(t, b.client(t, PathPublish), "call_p2", map[string]any{"artifact_id": "art_pub", "channel": "print"}, fp)
	wantState(t, other, a2a.TaskStateCompleted)

	pubs := a.ledger.List()
	if len(pubs) != 2 || pubs[0].CallID != "call_p1" || pubs[1].CallID != "call_p2" {
		t.Fatalf("ledger = %+v, want call_p1 then call_p2", pubs)
	}
	if pubs[0].Channel != "web" || pubs[0].Size != 9 || pubs[0].TaskID != string(first.ID) {
		t.Errorf("publication = %+v, want web, 9 bytes, task %s", pubs[0], first.ID)
	}
	resp, err := http.Get(b.agents.URL + PathPublish + "/publications")
	if err != nil {
		t.Fatalf("GET publications (on B) error = %v", err)
	}
	defer resp.Body.Close()
	var list []Publication
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("decode publications: %v", err)
	}
	if diff := cmp.Diff(pubs, list); diff != "" {
		t.Errorf("GET publications (on B) mismatch (-want +got):\n%s", diff)
	}
}

func TestRedisLedger(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l1, l2 := NewRedisLedger(rdb), NewRedisLedger(rdb)
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	p1 := Publication{ID: "pub_1", CallID: "c1", Channel: "web", PublishedAt: t0.Add(time.Second)}
	p2 := Publication{ID: "pub_2", CallID: "c2", Channel: "print", PublishedAt: t0.Add(2 * time.Second)}
	p0 := Publication{ID: "pub_0", Channel: "archive", PublishedAt: t0} // no call id

	if got, err := l1.record(t.Context(), p1); err != nil || got != p1 {
		t.Fatalf("record(p1) = %+v, %v; want p1, nil", got, err)
	}
	dup := Publication{ID: "pub_9", CallID: "c1", Channel: "print"}
	if got, err := l2.record(t.Context(), dup); !errors.Is(err, errAlreadyPublished) || got != p1 {
		t.Errorf("record(same call id, other ledger) = %+v, %v; want p1, errAlreadyPublished", got, err)
	}
	for _, p := range []Publication{p2, p0} {
		if _, err := l2.record(t.Context(), p); err != nil {
			t.Fatalf("record(%s) error = %v", p.ID, err)
		}
	}
	if diff := cmp.Diff([]Publication{p0, p1, p2}, l1.List()); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}
	if got := l1.Len(); got != 3 {
		t.Errorf("Len() = %d, want 3", got)
	}
	if !mr.Exists(DefaultLedgerKey) || mr.TTL(DefaultLedgerKey) != 0 {
		t.Errorf("ledger key %s exists = %v, ttl = %v; want a key without TTL", DefaultLedgerKey, mr.Exists(DefaultLedgerKey), mr.TTL(DefaultLedgerKey))
	}

	// A Valkey outage is an error, not an empty ledger, for ListContext and
	// for the publish call.
	mr.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := l1.ListContext(ctx); err == nil {
		t.Errorf("ListContext(valkey down) error = nil, want an error")
	}
	if _, err := l1.record(ctx, Publication{ID: "pub_3", CallID: "c3"}); err == nil || errors.Is(err, errAlreadyPublished) {
		t.Errorf("record(valkey down) error = %v, want a storage error", err)
	}
}
