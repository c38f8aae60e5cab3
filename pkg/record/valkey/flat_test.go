package valkey

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
)

// The conversation's meta and its artifacts are decoded once per stored
// value and handed out as copies: that is safe only while their types hold
// nothing a copy would share. A field of a map, slice or pointer type
// added to either must leave the cache (or copy deeply) first.
func TestFlatCachesHoldFlatTypes(t *testing.T) {
	t.Parallel()
	timeType := reflect.TypeFor[time.Time]()
	var check func(path string, ty reflect.Type)
	check = func(path string, ty reflect.Type) {
		switch {
		case ty == timeType:
		case ty.Kind() == reflect.Struct:
			for i := range ty.NumField() {
				check(path+"."+ty.Field(i).Name, ty.Field(i).Type)
			}
		case ty.Kind() >= reflect.Bool && ty.Kind() <= reflect.Complex128, ty.Kind() == reflect.String:
		default:
			t.Errorf("%s is a %s: a cached copy would share it", path, ty.Kind())
		}
	}
	check("record.Meta", reflect.TypeFor[record.Meta]())
	check("artifact.Artifact", reflect.TypeFor[artifact.Artifact]())
}

// What a step derives on read (the title, the update time) is its own:
// two reads of the same stored meta with other titles do not see each
// other's, and the cache stays within its bound.
func TestMetaDecodedOnce(t *testing.T) {
	t.Parallel()
	raw := `{"conversation_id":"c_flat","owner":"u","created_at":"2026-12-03T10:00:00Z","updated_at":"2026-12-03T10:00:00Z"}`
	a, err := decodeMeta("c_flat", raw, "first", "2026-12-03T10:01:00Z")
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeMeta("c_flat", raw, "second", "2026-12-03T10:02:00Z")
	if err != nil {
		t.Fatal(err)
	}
	if a.Title != "first" || b.Title != "second" || !b.UpdatedAt.After(a.UpdatedAt) || a.Owner != "u" || b.ID != "c_flat" {
		t.Errorf("reads = %+v and %+v, want each with its own title and update time", a, b)
	}
	var c flatCache[record.Meta]
	for i := range maxFlat + 10 {
		if _, err := c.decode(fmt.Sprintf(`{"conversation_id":"c%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	if n > maxFlat || c.n.Load() > maxFlat {
		t.Errorf("the cache holds %d values (counted %d), want at most %d", n, c.n.Load(), maxFlat)
	}
	if _, err := c.decode(`{"conversation_id":`); err == nil {
		t.Error("a broken meta decoded without an error")
	}
}

// BenchmarkDecodeMeta is one step's read of an unchanged meta.
func BenchmarkDecodeMeta(b *testing.B) {
	raw := `{"conversation_id":"c_bench","owner":"dev","created_at":"2026-12-03T10:00:00.123456789Z","updated_at":"2026-12-03T10:00:00.123456789Z"}`
	for b.Loop() {
		if _, err := decodeMeta("c_bench", raw, "Create a PNG image with the word Popelnase", "2026-12-03T10:01:00.123456789Z"); err != nil {
			b.Fatal(err)
		}
	}
}
