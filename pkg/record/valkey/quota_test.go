package valkey_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/localstore"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// TestQuotaHoldsUnderConcurrentPuts: 20 concurrent Puts of 10 KiB into a
// conversation with a 64 KiB quota. Exactly as many fit as the quota holds,
// the rest fail with ErrQuotaExceeded and leave no file, the count in
// Valkey matches the bytes the files on disk hold, and deleting releases the bytes. The
// same holds for bodies of known length (inline files, whose room is not
// read first) and for streams.
func TestQuotaHoldsUnderConcurrentPuts(t *testing.T) {
	for name, body := range map[string]func(n int) io.Reader{
		"known length": func(n int) io.Reader { return bytes.NewReader(make([]byte, n)) },
		"stream":       func(n int) io.Reader { return struct{ io.Reader }{bytes.NewReader(make([]byte, n))} },
	} {
		t.Run(name, func(t *testing.T) { quotaHolds(t, body) })
	}
}

func quotaHolds(t *testing.T, body func(n int) io.Reader) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := t.Context()
		s := valkey.New(c, valkey.Options{})
		dir := t.TempDir()
		local, err := localstore.New(dir, "http://x", []byte("k"))
		if err != nil {
			t.Fatal(err)
		}
		const limit, size = 64 << 10, 10 << 10
		arts := artifact.WithQuota(local, s.Usage(), limit)
		cid := valkeytest.ID(t, "c")
		t.Cleanup(func() { _ = arts.DeleteConversation(context.Background(), cid) })

		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = arts.Put(ctx, cid, fmt.Sprintf("art_%02d", i), "text/plain", body(size))
			})
		}
		wg.Wait()
		stored := 0
		for _, err := range errs {
			switch {
			case err == nil:
				stored++
			case errors.Is(err, artifact.ErrQuotaExceeded):
			default:
				t.Fatalf("Put error = %v, want nil or ErrQuotaExceeded", err)
			}
		}
		if stored != limit/size {
			t.Errorf("%d Puts succeeded, want %d (the quota holds %d of them)", stored, limit/size, limit/size)
		}
		// The bytes the files on disk hold, each read back from the store
		// (a file starts with a line of its content type).
		var onDisk int64
		files, _ := filepath.Glob(filepath.Join(dir, cid, "*"))
		for _, f := range files {
			rc, _, err := local.Get(ctx, cid, filepath.Base(f))
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, rc)
			rc.Close()
			onDisk += n
		}
		used, err := s.Usage().Used(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		if used != onDisk || used != int64(stored*size) {
			t.Errorf("Used = %d, bytes on disk = %d, want both %d", used, onDisk, stored*size)
		}

		var qe *artifact.QuotaError
		if _, err := arts.Put(ctx, cid, "art_more", "text/plain", body(size)); !errors.As(err, &qe) || qe.Limit != limit {
			t.Fatalf("Put over the quota error = %v, want a *QuotaError with the limit", err)
		}
		for i := range errs {
			if errs[i] == nil {
				if err := arts.Delete(ctx, cid, fmt.Sprintf("art_%02d", i)); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		if got, _ := s.Usage().Used(ctx, cid); got != used-size {
			t.Errorf("Used after deleting one = %d, want %d", got, used-size)
		}
		if _, err := arts.Put(ctx, cid, "art_more", "text/plain", body(size)); err != nil {
			t.Errorf("Put after a delete made room = %v, want nil", err)
		}
		if err := arts.DeleteConversation(ctx, cid); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Usage().Used(ctx, cid); got != 0 {
			t.Errorf("Used after DeleteConversation = %d, want 0", got)
		}
	})
}
