package devstack

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/record"
)

// docs/design.md §3.6: the files a specialist returns count against the
// conversation's storage quota, in the same write as the call's outcome. A
// file that fits is counted exactly; one that does not fit fails its call
// with a message naming the quota, and leaves no file and no count behind.
// The reference turn's two calls return 91 and 71 bytes: with 100 bytes
// the first fits and the second does not.
func TestReturnedFilesCountWithTheirOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		quota int64
		fits  bool
	}{
		{"files that fit", 1 << 20, true},
		{"a file over what is left", 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st, c := stack(t, nil, func(cfg *Config) {
				cfg.DataDir = dir
				cfg.FastAgents = true
				cfg.Files = platform.Files{Quota: tc.quota}
			})
			cid := c.newConversation()
			tid := c.send(cid, "Create a PNG image with the word Popelnase")
			c.wait(cid, tid)
			outs, err := st.Platform.Store.Outcomes(t.Context(), cid, tid)
			if err != nil {
				t.Fatal(err)
			}
			var stored int64
			var arts, failed int
			for _, o := range outs[tid] {
				for _, a := range o.Artifacts {
					stored += a.Size
					arts++
				}
				if o.Result.Status == record.ResultFailed {
					failed++
					if !strings.Contains(o.Result.Error, "does not fit") || !strings.Contains(o.Result.Error, "storage quota of 100 bytes") {
						t.Errorf("failed call %s says %q, want it to say the file does not fit the 100-byte quota", o.CallID, o.Result.Error)
					}
				}
			}
			used, err := st.Redis.HGet(t.Context(), "conv:{"+cid+"}:quota", "total").Int64()
			if errors.Is(err, redis.Nil) {
				used, err = 0, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "artifacts", cid, "*"))
			if used != stored {
				t.Errorf("quota counts %d bytes, want the %d the stored artifacts hold", used, stored)
			}
			if len(files) != arts {
				t.Errorf("files on disk = %v, want each of the %d stored artifacts", files, arts)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.fits]; failed != want || arts != 2-want {
				t.Errorf("%d calls failed and %d artifacts stored, want %d failed and %d stored", failed, arts, want, 2-want)
			}
		})
	}
}
