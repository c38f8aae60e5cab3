package devstack

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/clientagent/clientagent/pkg/record/valkey/localserver"
)

// A stack that kept its conversations in the embedded store's snapshot,
// restarted once a Valkey server is installed, finds them in the server:
// the snapshot is carried over once, and renamed.
func TestEmbeddedSnapshotCarriedToServer(t *testing.T) {
	t.Parallel()
	bin := localserver.Find()
	if bin == "" {
		t.Fatalf("none of %v on PATH: install redis-server or valkey-server (.ci/run does)", localserver.Binaries)
	}
	dir := t.TempDir()
	first, c := stack(t, nil, func(cfg *Config) { cfg.DataDir, cfg.PersistEmbedded = dir, true })
	if k := first.Store(); k.Kind != StoreEmbedded || !k.Persistent {
		t.Fatalf("store = %+v, want the embedded store, persistent", k)
	}
	cid := c.newConversation()
	tid := c.send(cid, "Create an SVG with the word Kept")
	if v := c.wait(cid, tid); v.Status != "succeeded" {
		t.Fatalf("turn = %s", v.Status)
	}
	first.Close()
	snapshot := filepath.Join(StoreDir(dir, "127.0.0.1:0"), "embedded.snapshot")
	if _, err := os.Stat(snapshot); err != nil {
		t.Fatalf("no snapshot after Close: %v", err)
	}

	second, c2 := stack(t, nil, func(cfg *Config) { cfg.DataDir, cfg.ValkeyServer = dir, bin })
	if k := second.Store(); k.Kind != StoreServer || k.Version == "" {
		t.Fatalf("store = %+v, want the server", k)
	}
	if v := c2.turn(cid, tid); v.Status != "succeeded" {
		t.Fatalf("after the move the turn = %q, want succeeded", v.Status)
	}
	if _, err := os.Stat(snapshot + ".imported"); err != nil {
		t.Errorf("the snapshot was not renamed after the import: %v", err)
	}
	second.Close()

	// The server's own data is kept from now on.
	_, c3 := stack(t, nil, func(cfg *Config) { cfg.DataDir, cfg.ValkeyServer = dir, bin })
	var conv struct {
		Turns []struct {
			Status string `json:"status"`
		} `json:"turns"`
	}
	if code := c3.do("GET", "/v1/conversations/"+cid, nil, &conv); code != http.StatusOK || len(conv.Turns) != 1 {
		t.Fatalf("GET conversation on the restarted server = %d %+v", code, conv)
	}
}
