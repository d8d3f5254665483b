package activities

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
)

// LocalCache keeps the objects a GPU node wrote most recently, up to a
// byte budget, so the exam's next stage on the same node reads its input
// from memory instead of the object store. Every object is still written
// to the store: the cache only saves reads, and a stage that misses it
// (another node, a restarted one) reads the store as before.
//
// An object's key names one exam's output and every run writes the same
// content under it, so an entry never goes stale in a way that matters.
type LocalCache struct {
	max int64

	mu    sync.Mutex
	size  int64
	order *list.List // front: most recently used
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key string
	b   []byte
}

// NewLocalCache makes a cache holding at most maxBytes.
func NewLocalCache(maxBytes int64) *LocalCache {
	return &LocalCache{max: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the object under key, if the cache holds it. The bytes
// must not be modified.
func (c *LocalCache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).b, true
}

// Put keeps b under key (replacing what was there), evicting the least
// recently used objects to stay within the budget. An object larger than
// the whole budget is not kept.
func (c *LocalCache) Put(key string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.size -= int64(len(e.Value.(*cacheEntry).b))
		c.order.Remove(e)
		delete(c.byKey, key)
	}
	if int64(len(b)) > c.max {
		return
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key: key, b: b})
	c.size += int64(len(b))
	for c.size > c.max {
		last := c.order.Back()
		ent := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.byKey, ent.key)
		c.size -= int64(len(ent.b))
	}
}

// Size is the bytes held.
func (c *LocalCache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// readCounter counts the bytes one stage read from the object store.
type readCounter struct{ n atomic.Int64 }

type readCounterKey struct{}

func withReadCounter(ctx context.Context, rc *readCounter) context.Context {
	return context.WithValue(ctx, readCounterKey{}, rc)
}

func countRead(ctx context.Context, n int64) {
	if rc, ok := ctx.Value(readCounterKey{}).(*readCounter); ok {
		rc.n.Add(n)
	}
}
