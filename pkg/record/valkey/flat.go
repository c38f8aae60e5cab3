package valkey

import (
	"sync"
	"sync/atomic"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/record"
)

// flatCache keeps values decoded from the JSON they are stored as, for
// types whose copy shares nothing (strings, numbers, times: no maps,
// slices or pointers; TestFlatCachesHoldFlatTypes). Every step reads the
// conversation's meta and the newest artifacts again, unchanged since the
// step before, so each distinct stored value is decoded once. It is
// bounded: past maxFlat values it starts again empty.
type flatCache[T any] struct {
	m sync.Map // stored JSON → T
	n atomic.Int64
}

const maxFlat = 4096

var (
	metas     flatCache[record.Meta]
	artifacts flatCache[artifact.Artifact]
)

func (c *flatCache[T]) decode(raw string) (T, error) {
	if v, ok := c.m.Load(raw); ok {
		return v.(T), nil
	}
	var v T
	if err := unmarshal([]byte(raw), &v); err != nil {
		return v, err
	}
	if c.n.Add(1) > maxFlat {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(raw, v)
	return v, nil
}
