package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// starts is a Step Functions client that records each StartExecution's
// input and the store's round trips so far.
type starts struct {
	api.Executions
	rt     *valkeytest.RoundTrips
	mu     sync.Mutex
	inputs []map[string]any
	at     []int64
}

func (s *starts) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	var v map[string]any
	_ = json.Unmarshal([]byte(*in.Input), &v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inputs, s.at = append(s.inputs, v), append(s.at, s.rt.N.Load())
	return &sfn.StartExecutionOutput{ExecutionArn: in.Name, StartDate: new(time.Time)}, nil
}

// A plain message is one round trip (docs/architecture.md): text alone,
// to a conversation of the user's where no turn runs or waits, is stored
// by one write that checks what a read would have, and reads ahead for
// the first LLM step, whose token the execution gets. Someone else's
// conversation is 404 and gets nothing written; a message to a
// conversation with a turn running, and a message with files, are read
// first, as before.
func TestAPlainMessageIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	rt := &valkeytest.RoundTrips{}
	rdb.AddHook(rt)
	store := valkey.New(rdb, valkey.Options{ReadBack: true})
	local := &auth.Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	exec := &starts{rt: rt}
	srv := httptest.NewServer((&api.Server{Store: store, Executions: exec, Auth: local, MaxText: 16000,
		StateMachineARN: "arn:aws:states:us-east-1:1:stateMachine:t"}).Handler())
	t.Cleanup(srv.Close)
	ctx := t.Context()
	now := time.Now().UTC()
	for cid, owner := range map[string]string{"c1": "dev", "c2": "someone", "c3": "dev"} {
		if err := store.Create(ctx, record.Meta{ID: cid, Owner: owner, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.SaveTurn(ctx, "c1", &record.Turn{ID: "t_0", StartedAt: now, UpdatedAt: now, Status: record.StatusSucceeded, Text: "before"}); err != nil {
		t.Fatal(err)
	}
	tok, _ := local.Mint("dev")
	post := func(cid string, body map[string]any) (int, string) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/conversations/"+cid+"/messages", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			TurnID string `json:"turn_id"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v.TurnID
	}
	started := func() (map[string]any, int64) {
		exec.mu.Lock()
		defer exec.mu.Unlock()
		return exec.inputs[len(exec.inputs)-1], exec.at[len(exec.at)-1]
	}

	// The server learns the scripts (a first use is EVALSHA, then EVAL).
	if code, _ := post("c3", map[string]any{"text": "warm up"}); code != http.StatusAccepted {
		t.Fatalf("POST to c3 = %d, want 202", code)
	}

	// An idle conversation of the user's: one round trip before the start.
	n := rt.N.Load()
	code, tid := post("c1", map[string]any{"text": "draw a cat"})
	if code != http.StatusAccepted || tid == "" {
		t.Fatalf("POST a plain message = %d %q, want 202 with a turn", code, tid)
	}
	in, at := started()
	if got := at - n; got != 1 {
		t.Errorf("the POST made %d round trips before its execution started, want 1 (its write)", got)
	}
	if in["turn_id"] != tid || in["after"] == nil || in["after"] == "" {
		t.Errorf("execution input = %v, want turn %s with the first step's read ahead (after)", in, tid)
	}
	conv, _, err := store.LoadStep(ctx, "c1", record.Query{TurnID: tid})
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := conv.Turn(tid); !ok || tr.Status != record.StatusRunning || tr.Text != "draw a cat" {
		t.Fatalf("stored turn = %+v (found %v), want it running with the text", tr, ok)
	}

	// Someone else's conversation: 404, as a missing one, nothing written.
	if code, _ := post("c2", map[string]any{"text": "hello"}); code != http.StatusNotFound {
		t.Errorf("POST to someone else's conversation = %d, want 404", code)
	}
	if code, _ := post("c_none", map[string]any{"text": "hello"}); code != http.StatusNotFound {
		t.Errorf("POST to no conversation = %d, want 404", code)
	}
	if conv, _, err := store.LoadStep(ctx, "c2", record.Query{}); err != nil || len(conv.Turns) != 0 {
		t.Errorf("someone else's conversation after the POST: %v, %v; want no turn", conv, err)
	}

	// A turn runs in c1 now: the next message is read first (two round
	// trips, the read and the write) and starts its turn beside it.
	n = rt.N.Load()
	code, second := post("c1", map[string]any{"text": "and a dog"})
	if code != http.StatusAccepted || second == "" || second == tid {
		t.Fatalf("POST beside a running turn = %d %q, want 202 with a new turn", code, second)
	}
	if _, at := started(); at-n < 2 {
		t.Errorf("beside a running turn the POST made %d round trips before its execution started, want the read and the write", at-n)
	}
}
