package app

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"octflow/storage"
)

// registerStoreCounts exports what the process's object store client
// has asked of its endpoint: requests by kind, and the bytes of the
// objects it read and wrote (storage.Counts).
func registerStoreCounts(reg prometheus.Registerer, s *storage.Store) error {
	var cs []prometheus.Collector
	for _, op := range storage.Ops {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "octflow_object_store_requests_total",
			Help:        "Requests this process made of the object store, by kind (a listing counts once).",
			ConstLabels: prometheus.Labels{"op": string(op)},
		}, func() float64 { return float64(s.Counts().Requests[op]) }))
	}
	for direction, bytes := range map[string]func(storage.Counts) int64{
		"read":    func(c storage.Counts) int64 { return c.BytesRead },
		"written": func(c storage.Counts) int64 { return c.BytesWritten },
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "octflow_object_store_bytes_total",
			Help:        "Bytes of the objects this process read from and wrote to the object store.",
			ConstLabels: prometheus.Labels{"direction": direction},
		}, func() float64 { return float64(bytes(s.Counts())) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				continue // another App of this process shares the registry
			}
			return fmt.Errorf("object store metrics: %w", err)
		}
	}
	return nil
}
