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
	"strings"
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

// errMoved is take's error when keys kept appearing while it read: the
// store changed under it, so it is tried again at the next tick.
var errMoved = errors.New("the store kept changing while it was read")

// take reads the whole store through c as one moment: it lists the keys
// and their types, then reads them all in one MULTI/EXEC (which the
// embedded server runs with no other command in between) together with
// the key list again. A key that appeared in between, or changed its type,
// makes it start over (three times at most): a snapshot never holds a
// write without the keys written with it.
func take(ctx context.Context, c redis.UniversalClient) (*snapshot, error) {
	for range 3 {
		s, err := takeOnce(ctx, c)
		if !errors.Is(err, errMoved) {
			return s, err
		}
	}
	return nil, errMoved
}

func takeOnce(ctx context.Context, c redis.UniversalClient) (*snapshot, error) {
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		return nil, fmt.Errorf("read the store: %w", err)
	}
	p := c.Pipeline()
	types := make([]*redis.StatusCmd, len(keys))
	for i, k := range keys {
		types[i] = p.Type(ctx, k)
	}
	if _, err := p.Exec(ctx); err != nil && len(keys) > 0 {
		return nil, fmt.Errorf("read the store: %w", err)
	}
	listed := make(map[string]bool, len(keys))
	reads := make([]redis.Cmder, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	now := time.Now()
	tx := c.TxPipeline()
	for i, k := range keys {
		listed[k] = true
		switch types[i].Val() {
		case "string":
			reads[i] = tx.Get(ctx, k)
		case "hash":
			reads[i] = tx.HGetAll(ctx, k)
		case "set":
			reads[i] = tx.SMembers(ctx, k)
		case "zset":
			reads[i] = tx.ZRangeWithScores(ctx, k, 0, -1)
		case "list":
			reads[i] = tx.LRange(ctx, k, 0, -1)
		case "stream":
			reads[i] = tx.XRange(ctx, k, "-", "+")
		default:
			continue // gone since it was listed, or a type the record never uses
		}
		ttls[i] = tx.PTTL(ctx, k)
	}
	after := tx.Keys(ctx, "*")
	if _, err := tx.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, fmt.Errorf("read the store: %w", err)
	}
	for _, k := range after.Val() {
		if !listed[k] {
			return nil, errMoved
		}
	}
	s := &snapshot{Version: snapshotVersion, Taken: now.UTC(), Keys: make([]snapKey, 0, len(keys))}
	for i, k := range keys {
		if reads[i] == nil {
			continue
		}
		if err := reads[i].Err(); errors.Is(err, redis.Nil) {
			continue // deleted in between: it is not in the store
		} else if err != nil {
			return nil, errMoved // its type changed in between
		}
		sk := snapKey{Key: k, Type: types[i].Val()}
		if d := ttls[i].Val(); d > 0 {
			sk.ExpireAt = now.Add(d).UnixMilli()
		}
		switch r := reads[i].(type) {
		case *redis.StringCmd:
			sk.Values = []string{r.Val()}
		case *redis.MapStringStringCmd:
			for f, v := range r.Val() {
				sk.Values = append(sk.Values, f, v)
			}
		case *redis.StringSliceCmd:
			sk.Values = r.Val()
		case *redis.ZSliceCmd:
			for _, z := range r.Val() {
				sk.Values = append(sk.Values, str(z.Member), strconv.FormatFloat(z.Score, 'g', -1, 64))
			}
		case *redis.XMessageSliceCmd:
			for _, m := range r.Val() {
				e := streamEntry{ID: m.ID}
				for f, v := range m.Values {
					e.Fields = append(e.Fields, f, str(v))
				}
				sk.Stream = append(sk.Stream, e)
			}
		}
		if len(sk.Values) == 0 && len(sk.Stream) == 0 && sk.Type != "string" {
			continue // emptied in between: Valkey has no empty collections
		}
		s.Keys = append(s.Keys, sk)
	}
	return s, nil
}

func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
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
