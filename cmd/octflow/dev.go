package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"octflow/app"
	"octflow/config"
	"octflow/devstack"
	"octflow/devsystem"
	"octflow/exam"
)

// devPolicy is the production policy with retries and lost-node
// detection short enough to watch.
func devPolicy() exam.Policy {
	p := exam.DefaultPolicy()
	p.RetryBase, p.RetryCap, p.HeartbeatTimeout = 10*time.Second, time.Minute, 15*time.Second
	return p
}

// runDev is `octflow dev`: the whole system in one process.
func runDev(ctx context.Context, args []string) error {
	s := config.New("dev", nil)
	logc := config.BindLog(s, "console")
	policy := config.BindPolicy(s, app.PolicySettings(devPolicy()))
	models := config.BindModels(s)
	serverTLS := config.BindServerTLS(s)
	var cfg devsystem.Config
	s.String(&cfg.DataDir, "data-dir", "OCTFLOW_DATA_DIR", ".data", "where exams, objects and dev secrets are kept")
	s.String(&cfg.APIAddr, "api-addr", "OCTFLOW_API_ADDR", "127.0.0.1:8080", "API listen address")
	s.String(&cfg.TemporalAddr, "temporal-addr", "OCTFLOW_TEMPORAL_ADDR", "127.0.0.1:7233", "Temporal frontend address")
	s.String(&cfg.UIAddr, "ui-addr", "OCTFLOW_UI_ADDR", "127.0.0.1:8233", "Temporal Web UI address, or off")
	s.String(&cfg.S3Addr, "s3-addr", "OCTFLOW_S3_ADDR", "127.0.0.1:9000", "S3 endpoint address")
	s.String(&cfg.MetricsAddr, "metrics-addr", "OCTFLOW_METRICS_ADDR", "127.0.0.1:9464", "Prometheus /metrics address, off the API's port, or off")
	s.Int(&cfg.GPUNodes, "gpu-nodes", "OCTFLOW_GPU_NODES", 2, "simulated GPU nodes in this process")
	s.Duration(&cfg.StopTimeout, "drain-timeout", "OCTFLOW_DRAIN_TIMEOUT", 90*time.Second, "how long running stages may finish on shutdown")
	s.String(&cfg.PACSURL, "pacs-url", "OCTFLOW_PACS_URL", "",
		"DICOMweb base URL of the PACS the demo campus's results go to (octflow posts to its /studies); empty: no export")
	s.String(&cfg.PACSFile, "pacs-file", "OCTFLOW_PACS_FILE", "",
		"JSON file naming each campus's PACS as in production (URL, CA and credential files); replaces --pacs-url")
	var pgURL, pgPassword string
	s.String(&pgURL, "temporal-postgres", "OCTFLOW_TEMPORAL_POSTGRES", "",
		"keep Temporal's state in PostgreSQL instead of SQLite: postgres://user@host:port/database (database and database_visibility are created)")
	s.Secret(&pgPassword, "OCTFLOW_TEMPORAL_POSTGRES_PASSWORD")
	s.Check(func() error {
		if cfg.GPUNodes < 0 {
			return fmt.Errorf("OCTFLOW_GPU_NODES (--gpu-nodes) %d: want 0 or more", cfg.GPUNodes)
		}
		if cfg.PACSURL != "" && cfg.PACSFile != "" {
			return errors.New("OCTFLOW_PACS_URL (--pacs-url) and OCTFLOW_PACS_FILE (--pacs-file): name the PACS one way")
		}
		if cfg.PACSURL != "" {
			if u, err := url.Parse(cfg.PACSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("OCTFLOW_PACS_URL (--pacs-url) %q: want an http or https URL", cfg.PACSURL)
			}
		}
		if pgURL == "" {
			return nil
		}
		pg, err := devstack.ParsePostgresURL(pgURL)
		if err != nil {
			return fmt.Errorf("OCTFLOW_TEMPORAL_POSTGRES (--temporal-postgres): %w", err)
		}
		if pgPassword != "" {
			pg.Password = pgPassword
		}
		cfg.Postgres = &pg
		return nil
	})
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	if cfg.Policy, err = app.Policy(*policy, devPolicy()); err != nil {
		return err
	}
	cfg.Backends, cfg.APITLS = app.Backends(*models), serverTLS.Config()
	tuneEmbeddedGC(os.Getenv)

	d, err := devsystem.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	dir := d.Stack.DataDir()
	fmt.Printf(`
octflow dev is running (data in %s, Temporal on %s)

  API           %s
  Metrics       %s
  Temporal UI   %s
  Temporal      %s (namespace %s)
  S3            http://%s (bucket octflow)

  demo tokens   %s
  join env      %s   (source it before octflow api|worker|gpuworker)

Submit a phantom exam:
  ./bin/octflow phantom --out exam.dcm --seed 1
  ./bin/octflow submit --api %s --dev-tokens %s --file exam.dcm --wait

Ctrl-C stops it; running stages finish first.
`, dir, temporalStore(cfg.Postgres), d.App.APIURL(), cmp.Or(d.App.MetricsURL(), "off"), d.Stack.UIURL(), d.Stack.TemporalAddr(), d.Stack.Namespace(),
		d.Stack.S3Endpoint(), filepath.Join(dir, "dev-tokens.json"), filepath.Join(dir, "dev.env"),
		d.App.APIURL(), filepath.Join(dir, "dev-tokens.json"))
	<-ctx.Done()
	log.Info("stopping: draining running stages, then Temporal and S3")
	d.Stop()
	return nil
}

// temporalStore names where the dev stack keeps Temporal's state.
func temporalStore(pg *devstack.Postgres) string {
	if pg == nil {
		return "SQLite"
	}
	return "PostgreSQL " + pg.Addr + "/" + pg.Database
}
