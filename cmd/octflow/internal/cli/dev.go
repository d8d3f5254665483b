package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"octflow/activities"
	"octflow/app"
	"octflow/config"
	"octflow/deployment"
	"octflow/exam"
	"octflow/internal/buildinfo"
	"octflow/internal/devstack"
	"octflow/internal/devsystem"
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
	policy := config.BindPolicy(s, devPolicy())
	models := config.BindModels(s, activities.Pipeline().Specs())
	serverTLS := config.BindServerTLS(s)
	dev := config.BindDev(s)
	// Unversioned by default: a dev data dir outlives builds, and exams
	// pinned to an old one would wait for its workers.
	dep := config.BindDeployment(s, "", buildinfo.Read().BuildID())
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	cfg := devsystem.Config{DataDir: dev.DataDir, APIAddr: dev.APIAddr, TemporalAddr: dev.TemporalAddr, UIAddr: dev.UIAddr,
		S3Addr: dev.S3Addr, MetricsAddr: dev.MetricsAddr, GPUNodes: dev.GPUNodes, StopTimeout: dev.Drain,
		PACSURL: dev.PACSURL, PACSFile: dev.PACSFile, Policy: *policy,
		Deployment: deployment.VersionOf(dep.Name, dep.BuildID)}
	if dev.Postgres != "" {
		pg, err := devstack.ParsePostgresURL(dev.Postgres)
		if err != nil {
			return fmt.Errorf("OCTFLOW_TEMPORAL_POSTGRES (--temporal-postgres): %w", err)
		}
		if dev.PostgresPassword != "" {
			pg.Password = dev.PostgresPassword
		}
		cfg.Postgres = &pg
	}
	cfg.Models, cfg.APITLS = app.Models(*models), serverTLS.Config()
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
