package embedded

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// snapshotVersion is the format of a snapshot file; a file of another
// version is refused rather than misread.
const snapshotVersion = 1

// snapshot is a whole database: every key with its type, value and expiry.
type snapshot struct {
	Version int
	Taken   time.Time
	Keys    []snapKey
}

type snapKey struct {
	Key  string
	Type string
	// ExpireAt is the key's expiry in Unix milliseconds (0: none).
	ExpireAt int64
	// Values: a string's value; a hash's fields and values, a zset's
	// members and scores, in turn; a set's members; a list's items.
	Values []string
	Stream []streamEntry
}

type streamEntry struct {
	ID     string
	Fields []string
}

// dumpScript reads every key in one script, so a snapshot is one
// consistent moment of the store (the embedded server runs a script with
// no other command in between).
var dumpScript = redis.NewScript(`
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then t = t['ok'] end
  local v
  if t == 'string' then v = {redis.call('GET', k)}
  elseif t == 'hash' then v = redis.call('HGETALL', k)
  elseif t == 'set' then v = redis.call('SMEMBERS', k)
  elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  elseif t == 'list' then v = redis.call('LRANGE', k, 0, -1)
  elseif t == 'stream' then v = redis.call('XRANGE', k, '-', '+')
  end
  if v then table.insert(out, {k, t, redis.call('PTTL', k), v}) end
end
return out
`)

// take reads the whole store through c.
func take(ctx context.Context, c redis.Scripter) (*snapshot, error) {
	now := time.Now()
	res, err := dumpScript.EvalRO(ctx, c, nil).Slice()
	if err != nil {
		return nil, fmt.Errorf("read the store: %w", err)
	}
	s := &snapshot{Version: snapshotVersion, Taken: now.UTC(), Keys: make([]snapKey, 0, len(res))}
	for _, r := range res {
		row, ok := r.([]any)
		if !ok || len(row) != 4 {
			return nil, fmt.Errorf("read the store: unexpected row %T", r)
		}
		k := snapKey{Key: str(row[0]), Type: str(row[1])}
		if pttl, ok := row[2].(int64); ok && pttl > 0 {
			k.ExpireAt = now.Add(time.Duration(pttl) * time.Millisecond).UnixMilli()
		}
		vals, _ := row[3].([]any)
		if k.Type == "stream" {
			for _, e := range vals {
				ev, ok := e.([]any)
				if !ok || len(ev) != 2 {
					continue
				}
				fields, _ := ev[1].([]any)
				se := streamEntry{ID: str(ev[0]), Fields: make([]string, len(fields))}
				for i, f := range fields {
					se.Fields[i] = str(f)
				}
				k.Stream = append(k.Stream, se)
			}
		} else {
			k.Values = make([]string, len(vals))
			for i, v := range vals {
				k.Values[i] = str(v)
			}
		}
		s.Keys = append(s.Keys, k)
	}
	return s, nil
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// write stores s at path atomically: a temporary file beside it, synced,
// then renamed over it, so a crash leaves the old snapshot or the new one.
func (s *snapshot) write(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, there is nothing to remove
	w := bufio.NewWriterSize(f, 1<<16)
	if err := gob.NewEncoder(w).Encode(s); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// readSnapshot reads path; a missing file is (nil, nil).
func readSnapshot(path string) (*snapshot, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var s snapshot
	if err := gob.NewDecoder(bufio.NewReader(f)).Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("%s: snapshot format %d, want %d", path, s.Version, snapshotVersion)
	}
	return &s, nil
}

// LoadSnapshot writes the keys of the snapshot file at path into the
// store c talks to (keys already there are replaced), skipping keys whose
// expiry has passed, and returns how many it wrote. A missing file loads
// nothing. The local stack uses it for the embedded server's own file, and
// to carry an embedded store's conversations into a Valkey server started
// later on the same data directory.
func LoadSnapshot(ctx context.Context, c redis.Cmdable, path string) (int, error) {
	s, err := readSnapshot(path)
	if err != nil || s == nil {
		return 0, err
	}
	now := time.Now().UnixMilli()
	n := 0
	const batch = 200
	p := c.Pipeline()
	flush := func() error {
		if p.Len() == 0 {
			return nil
		}
		_, err := p.Exec(ctx)
		return err
	}
	for _, k := range s.Keys {
		if k.ExpireAt != 0 && k.ExpireAt <= now {
			continue
		}
		p.Del(ctx, k.Key)
		switch k.Type {
		case "string":
			if len(k.Values) == 1 {
				p.Set(ctx, k.Key, k.Values[0], 0)
			}
		case "hash":
			if len(k.Values) > 0 {
				p.HSet(ctx, k.Key, toAny(k.Values)...)
			}
		case "set":
			if len(k.Values) > 0 {
				p.SAdd(ctx, k.Key, toAny(k.Values)...)
			}
		case "list":
			if len(k.Values) > 0 {
				p.RPush(ctx, k.Key, toAny(k.Values)...)
			}
		case "zset":
			zs := make([]redis.Z, 0, len(k.Values)/2)
			for i := 0; i+1 < len(k.Values); i += 2 {
				score, err := strconv.ParseFloat(k.Values[i+1], 64)
				if err != nil {
					return n, fmt.Errorf("%s: key %q: score %q: %w", path, k.Key, k.Values[i+1], err)
				}
				zs = append(zs, redis.Z{Member: k.Values[i], Score: score})
			}
			if len(zs) > 0 {
				p.ZAdd(ctx, k.Key, zs...)
			}
		case "stream":
			for _, e := range k.Stream {
				p.XAdd(ctx, &redis.XAddArgs{Stream: k.Key, ID: e.ID, Values: toAny(e.Fields)})
			}
		default:
			continue
		}
		if k.ExpireAt != 0 {
			p.PExpireAt(ctx, k.Key, time.UnixMilli(k.ExpireAt))
		}
		n++
		if p.Len() >= batch {
			if err := flush(); err != nil {
				return n, fmt.Errorf("load %s: %w", path, err)
			}
		}
	}
	if err := flush(); err != nil {
		return n, fmt.Errorf("load %s: %w", path, err)
	}
	return n, nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
