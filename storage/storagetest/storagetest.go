// Package storagetest is an object store in memory for tests of what
// stores objects (the gateway's intake and admission).
package storagetest

import (
	"bytes"
	"context"
	"io"
	"maps"
	"slices"
	"sync"

	"octflow/storage"
)

// Memory is an object store in memory that notes every write. Its zero
// value is an empty store.
type Memory struct {
	mu      sync.Mutex
	objects map[string][]byte
	puts    []string
}

// NewMemory is a store holding objects (a copy of the map).
func NewMemory(objects map[string][]byte) *Memory {
	return &Memory{objects: maps.Clone(objects)}
}

// Put stores the object under key.
func (s *Memory) Put(_ context.Context, key string, r io.Reader, _ int64, _ string) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects == nil {
		s.objects = map[string][]byte{}
	}
	s.objects[key] = b
	s.puts = append(s.puts, key)
	return nil
}

// Get reads the object under key, or storage.ErrNotFound.
func (s *Memory) Get(_ context.Context, key string) (io.ReadCloser, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return nil, 0, storage.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// Exists says whether an object is under key.
func (s *Memory) Exists(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.objects[key]
	return ok, nil
}

// Delete removes the object under key.
func (s *Memory) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return nil
}

// Ping answers: the store is always there.
func (s *Memory) Ping(context.Context) error { return nil }

// Object is the object under key (nil: none).
func (s *Memory) Object(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[key]
}

// Puts are the keys written, in the order they were.
func (s *Memory) Puts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.puts)
}
