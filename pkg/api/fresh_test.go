package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// describeCounter is a Step Functions client whose executions have failed,
// except t_busy's, which runs; it counts DescribeExecution calls.
type describeCounter struct {
	api.Executions
	n atomic.Int32
}

func (d *describeCounter) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	d.n.Add(1)
	if strings.HasSuffix(*in.ExecutionArn, ":t_busy") {
		return &sfn.DescribeExecutionOutput{Status: types.ExecutionStatusRunning}, nil
	}
	return &sfn.DescribeExecutionOutput{Status: types.ExecutionStatusFailed}, nil
}

// A running turn that a step wrote a moment ago is shown as its record says
// without a DescribeExecution call (that API is throttled per account and
// clients poll every second); one quiet for longer than FreshFor is checked,
// and a dead execution reads as failed.
func TestRunningTurnAsksStepFunctionsOnlyWhenQuiet(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := valkey.New(rdb, valkey.Options{})
	local := &auth.Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	exec := &describeCounter{}
	srv := httptest.NewServer((&api.Server{Store: store, Executions: exec, Auth: local, StateMachineARN: "arn:aws:states:us-east-1:1:stateMachine:t"}).Handler())
	t.Cleanup(srv.Close)
	ctx := t.Context()
	now := time.Now().UTC()
	if err := store.Create(ctx, record.Meta{ID: "c1", Owner: "dev", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	quiet := now.Add(-api.DefaultFreshFor - time.Second)
	for id, at := range map[string]time.Time{"t_fresh": now.Add(-2 * time.Second), "t_quiet": quiet, "t_busy": quiet} {
		if err := store.SaveTurn(ctx, "c1", &record.Turn{ID: id, StartedAt: at, UpdatedAt: at, Status: record.StatusRunning, Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	tok, _ := local.Mint("dev")
	get := func(tid string) string {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/conversations/c1/turns/"+tid, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Status string `json:"status"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return v.Status
	}
	for range 5 {
		if s := get("t_fresh"); s != "running" {
			t.Fatalf("fresh turn = %s, want running", s)
		}
	}
	if n := exec.n.Load(); n != 0 {
		t.Errorf("DescribeExecution calls for a fresh turn = %d, want 0", n)
	}
	if s := get("t_quiet"); s != "failed" {
		t.Errorf("quiet turn with a failed execution = %s, want failed", s)
	}
	if n := exec.n.Load(); n != 1 {
		t.Errorf("DescribeExecution calls = %d, want 1 (for the quiet turn)", n)
	}
	// A quiet turn whose execution runs (a long specialist call) is asked
	// about once per FreshFor, not at every poll.
	for range 5 {
		if s := get("t_busy"); s != "running" {
			t.Fatalf("busy turn = %s, want running", s)
		}
	}
	if n := exec.n.Load(); n != 2 {
		t.Errorf("DescribeExecution calls = %d, want 2 (one more for the busy turn)", n)
	}
}
