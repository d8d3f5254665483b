package activities

import (
	"bytes"
	"testing"
)

func TestLocalCacheKeepsTheMostRecentObjectsWithinItsBudget(t *testing.T) {
	obj := func(n int) []byte { return bytes.Repeat([]byte{byte(n)}, 100) }
	cases := []struct {
		name    string
		budget  int64
		puts    []string // keys put in order, 100 bytes each
		gets    []string // keys read before the last put
		present []string
		absent  []string
	}{
		{"within budget: all kept", 300, []string{"a", "b", "c"}, nil, []string{"a", "b", "c"}, nil},
		{"over budget: the least recently used goes", 200, []string{"a", "b", "c"}, nil, []string{"b", "c"}, []string{"a"}},
		{"a read keeps an object", 200, []string{"a", "b", "c"}, []string{"a"}, []string{"a", "c"}, []string{"b"}},
		{"an object larger than the budget is not kept", 50, []string{"a"}, nil, nil, []string{"a"}},
		{"a put replaces the object under its key", 200, []string{"a", "a", "b"}, nil, []string{"a", "b"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := NewLocalCache(c.budget)
			for i, k := range c.puts {
				if i == len(c.puts)-1 {
					for _, g := range c.gets {
						cache.Get(g)
					}
				}
				cache.Put(k, obj(i))
			}
			for _, k := range c.present {
				if _, ok := cache.Get(k); !ok {
					t.Errorf("%s evicted", k)
				}
			}
			for _, k := range c.absent {
				if _, ok := cache.Get(k); ok {
					t.Errorf("%s kept", k)
				}
			}
			if cache.Size() > c.budget {
				t.Errorf("holds %d bytes, budget %d", cache.Size(), c.budget)
			}
		})
	}
	cache := NewLocalCache(1000)
	cache.Put("k", obj(1))
	cache.Put("k", obj(2))
	if b, _ := cache.Get("k"); b[0] != 2 || cache.Size() != 100 {
		t.Errorf("after replacing k: first byte %d, size %d; want 2 and 100", b[0], cache.Size())
	}
}
