package main

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"octflow/config"
	"octflow/exam"
	"octflow/temporalsetup"
	"octflow/workers"
)

// runSetup registers octflow's namespace and search attributes on a
// Temporal cluster. It is idempotent: a deploy may run it every time.
func runSetup(ctx context.Context, args []string) error {
	s := config.New("setup", nil)
	logc := config.BindLog(s, "json")
	temporalTLS := config.BindTemporalTLS(s)
	var addr, namespace string
	var retention, wait time.Duration
	s.String(&addr, "temporal-addr", "OCTFLOW_TEMPORAL_ADDR", "127.0.0.1:7233", "Temporal frontend host:port")
	s.String(&namespace, "namespace", "OCTFLOW_NAMESPACE", "default", "Temporal namespace to register")
	s.Duration(&retention, "retention", "OCTFLOW_RETENTION", 30*24*time.Hour, "how long Temporal keeps a closed exam's history (new namespace only)")
	s.Duration(&wait, "wait", "OCTFLOW_SETUP_WAIT", 2*time.Minute, "how long to wait for the cluster to answer and the namespace to be usable")
	s.Check(func() error {
		if retention < 24*time.Hour {
			return fmt.Errorf("OCTFLOW_RETENTION (--retention) %s: Temporal needs at least 24h", retention)
		}
		return nil
	})
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	c, err := workers.Dial(ctx, workers.DialOptions{HostPort: addr, Namespace: namespace, Identity: "setup@" + hostname(),
		Logger: log.Named("sdk"), TLS: temporalTLS.Config()})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := temporalsetup.Ensure(ctx, c, temporalsetup.Namespace{Name: namespace, Retention: retention,
		SearchAttributes: exam.SearchAttributeTypes()}); err != nil {
		return err
	}
	log.Info("namespace ready", zap.String("namespace", namespace), zap.Int("searchAttributes", len(exam.SearchAttributeTypes())))
	return nil
}
