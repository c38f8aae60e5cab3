package valkey

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
)

// ElastiCache Serverless is cluster mode (docs/design.md §4): every method must work
// through a cluster client, which refuses a transaction spanning slots.
func TestEveryMethodWorksOnACluster(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	s := New(rdb, Options{})
	ctx := t.Context()
	now := time.Now().UTC()
	if err := s.Create(ctx, record.Meta{ID: "cl1", Owner: "ann", CreatedAt: now}); err != nil {
		t.Fatalf("Create() = %v", err)
	}
	tr := &record.Turn{ID: "t1", StartedAt: now, UpdatedAt: now, Status: record.StatusRunning, Text: "hi",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	if err := s.SaveTurn(ctx, "cl1", tr, artifact.Artifact{ID: "art_1", Name: "a.png", MimeType: "image/png", CreatedAt: now}); err != nil {
		t.Fatalf("SaveTurn() = %v", err)
	}
	if err := s.PutArtifacts(ctx, "cl1", artifact.Artifact{ID: "art_2", Name: "b.png", MimeType: "image/png", CreatedAt: now}); err != nil {
		t.Fatalf("PutArtifacts() = %v", err)
	}
	if _, err := s.PutOutcome(ctx, "cl1", "t1", record.CallOutcome{CallID: "c1", Result: record.ToolResult{Status: "succeeded"}}); err != nil {
		t.Fatalf("PutOutcome() = %v", err)
	}
	if err := s.MarkAnswered(ctx, "cl1", "t1", "tok"); err != nil {
		t.Fatalf("MarkAnswered() = %v", err)
	}
	conv, outcomes, err := s.Load(ctx, "cl1", "t1")
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if len(conv.Turns) != 1 || len(conv.Artifacts) != 2 || len(outcomes) != 1 || conv.Turns[0].AnsweredToken != "tok" {
		t.Errorf("Load() = %d turns, %d artifacts, %d outcomes, answered %q; want 1, 2, 1, tok", len(conv.Turns), len(conv.Artifacts), len(outcomes), conv.Turns[0].AnsweredToken)
	}
	metas, err := s.List(ctx, "ann")
	if err != nil || len(metas) != 1 {
		t.Fatalf("List() = %v, %v; want one", metas, err)
	}
	if err := s.DeleteOutcome(ctx, "cl1", "t1", "c1"); err != nil {
		t.Fatalf("DeleteOutcome() = %v", err)
	}
	if err := s.Delete(ctx, "cl1"); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
}
