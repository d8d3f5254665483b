package cli

import (
	"context"

	"go.uber.org/zap"

	"octflow/app"
	"octflow/config"
	"octflow/exam"
	"octflow/temporalsetup"
)

// runSetup registers octflow's namespace and search attributes on a
// Temporal cluster. It is idempotent: a deploy may run it every time.
func runSetup(ctx context.Context, args []string) error {
	s := config.New("setup", nil)
	logc := config.BindLog(s, "json")
	temporalTLS := config.BindTemporalTLS(s)
	setup := config.BindSetup(s)
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	ctx, cancel := context.WithTimeout(ctx, setup.Wait)
	defer cancel()
	c, err := app.Dial(ctx, app.DialOptions{HostPort: setup.TemporalAddr, Namespace: setup.Namespace, Identity: "setup@" + hostname(),
		Logger: log.Named("sdk"), TLS: temporalTLS.Config()})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := temporalsetup.Ensure(ctx, c, temporalsetup.Namespace{Name: setup.Namespace, Retention: setup.Retention,
		SearchAttributes: exam.SearchAttributeTypes()}); err != nil {
		return err
	}
	log.Info("namespace ready", zap.String("namespace", setup.Namespace), zap.Int("searchAttributes", len(exam.SearchAttributeTypes())))
	return nil
}
