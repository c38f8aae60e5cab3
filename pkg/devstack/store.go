package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/record/valkey/embedded"
	"github.com/clientagent/clientagent/pkg/record/valkey/localserver"
)

// Store kinds of StoreInfo.
const (
	StoreURL      = "url"           // a Valkey at VALKEY_URL
	StoreServer   = "valkey-server" // a valkey-server child of the stack
	StoreEmbedded = "embedded"      // the embedded Valkey
)

// StoreInfo says where a stack keeps its conversations.
type StoreInfo struct {
	Kind       string
	Persistent bool
	// Where is the URL (without its password), directory or file.
	Where string
	// Version is the server's name and version (StoreServer).
	Version string
}

// Description is the banner's and the page's sentence.
func (i StoreInfo) Description() string {
	switch {
	case i.Kind == StoreURL:
		return "conversations are kept in the Valkey at " + i.Where
	case i.Kind == StoreServer:
		return fmt.Sprintf("conversations are kept in %s (%s, AOF)", i.Where, i.Version)
	case i.Persistent:
		return fmt.Sprintf("conversations are kept in %s (embedded Valkey: a snapshot every %v and at exit)", i.Where, embedded.DefaultSnapshotEvery)
	}
	return "conversations are kept in memory: lost on restart (embedded Valkey)"
}

// Store says where the stack keeps its conversations.
func (s *Stack) Store() StoreInfo { return s.store }

// defaultAddr is Config.Addr's default.
const defaultAddr = "127.0.0.1:8080"

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// StoreDir is the directory a stack listening on addr keeps its store in,
// under dataDir: "valkey" for the default address, "valkey-<addr>" for
// another, so two stacks run from one directory (the README's two-stack
// example) keep apart stores, and each finds its own again after a restart.
func StoreDir(dataDir, addr string) string {
	if addr == "" || addr == defaultAddr {
		return filepath.Join(dataDir, "valkey")
	}
	return filepath.Join(dataDir, "valkey-"+unsafeName.ReplaceAllString(addr, "_"))
}

// snapshotName is the embedded store's file in StoreDir.
const snapshotName = "embedded.snapshot"

// openStore opens the store cfg chooses: VALKEY_URL, else a server child,
// else the embedded one (persistent or not).
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (redis.UniversalClient, func(), StoreInfo, error) {
	dir := StoreDir(cfg.DataDir, cfg.Addr)
	switch {
	case cfg.ValkeyURL != "":
		rdb, closeFn, err := valkey.Open(ctx, cfg.ValkeyURL)
		if err != nil {
			return nil, nil, StoreInfo{}, fmt.Errorf("valkey: %w", err)
		}
		where := "(unparsable URL)"
		if u, err := url.Parse(cfg.ValkeyURL); err == nil {
			where = u.Redacted()
		}
		return rdb, closeFn, StoreInfo{Kind: StoreURL, Persistent: true, Where: where}, nil
	case cfg.ValkeyServer != "":
		srv, err := localserver.Start(ctx, localserver.Options{Dir: dir, Binary: cfg.ValkeyServer, Logger: log})
		if errors.Is(err, localserver.ErrInUse) {
			return nil, nil, StoreInfo{}, fmt.Errorf("valkey: %w: another clientagent dev on %s still runs (stop it first)", err, dir)
		}
		if err != nil {
			return nil, nil, StoreInfo{}, err
		}
		rdb, closeRDB, err := valkey.Open(ctx, srv.URL())
		if err != nil {
			srv.Close()
			return nil, nil, StoreInfo{}, fmt.Errorf("valkey: %w", err)
		}
		closeFn := func() { closeRDB(); srv.Close() }
		if err := importSnapshot(ctx, rdb, dir, log); err != nil {
			closeFn()
			return nil, nil, StoreInfo{}, err
		}
		return rdb, closeFn, StoreInfo{Kind: StoreServer, Persistent: true, Where: dir, Version: srv.Version()}, nil
	case cfg.PersistEmbedded:
		path := filepath.Join(dir, snapshotName)
		rdb, closeFn, err := embedded.OpenPersistent(ctx, embedded.Persistence{Path: path, Logger: log})
		if err != nil {
			return nil, nil, StoreInfo{}, err
		}
		return rdb, closeFn, StoreInfo{Kind: StoreEmbedded, Persistent: true, Where: path}, nil
	}
	rdb, closeFn, err := embedded.Open(ctx)
	if err != nil {
		return nil, nil, StoreInfo{}, fmt.Errorf("valkey: %w", err)
	}
	return rdb, closeFn, StoreInfo{Kind: StoreEmbedded}, nil
}

// importSnapshot carries the conversations of an embedded store kept in
// dir into a new, empty server there (a Valkey server was installed since),
// once: the file is renamed after.
func importSnapshot(ctx context.Context, rdb redis.UniversalClient, dir string, log *slog.Logger) error {
	path := filepath.Join(dir, snapshotName)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	n, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return fmt.Errorf("valkey: %w", err)
	}
	if n > 0 {
		return nil
	}
	keys, err := embedded.LoadSnapshot(ctx, rdb, path)
	if err != nil {
		return fmt.Errorf("valkey: import the embedded store's snapshot: %w", err)
	}
	if err := os.Rename(path, path+".imported"); err != nil {
		return fmt.Errorf("valkey: %w", err)
	}
	log.InfoContext(ctx, "imported the embedded store's snapshot into the valkey server", "keys", keys, "from", path)
	return nil
}
