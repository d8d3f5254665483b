package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"octflow/activities"
	"octflow/app"
	"octflow/codec"
	"octflow/config"
	"octflow/deployment"
	"octflow/internal/buildinfo"
	"octflow/workflows"
)

// runVersion prints this build.
func runVersion(_ context.Context, _ []string) error {
	info := buildinfo.Read()
	fmt.Printf("%s\nbuild ID %s\n", info, info.BuildID())
	return nil
}

// deploymentUsage is the deployment command's.
const deploymentUsage = `usage: octflow deployment <command> [flags]

Worker Versioning of the pipeline worker (docs/operations.md, Upgrades):

  status    the deployment's builds: current, ramping, draining, what each still runs
  promote   make this binary's build current (after the replay gate); --if-none on a first start
  ramp      send --percent of new exams to this binary's build (after the replay gate)
  rollback  make --build-id current again and end any ramp
  retire    say whether --build-id may go; --delete removes it once its workers are stopped
`

// runDeployment runs an operator's Worker Versioning command.
func runDeployment(ctx context.Context, args []string) error {
	if len(args) < 1 {
		fmt.Fprint(os.Stderr, deploymentUsage)
		return exitCode(2)
	}
	sub, args := args[0], args[1:]
	s := config.New("deployment "+sub, nil)
	logc := config.BindLog(s, "console")
	tc := config.BindTemporalClient(s)
	temporalTLS := config.BindTemporalTLS(s)
	build := buildinfo.Read().BuildID()
	dep := config.BindDeployment(s, "octflow", build)
	keys := config.BindCodec(s)
	switch sub {
	case "status", "promote", "ramp", "rollback", "retire":
	default:
		fmt.Fprint(os.Stderr, deploymentUsage)
		return exitCode(2)
	}
	cmd := config.BindDeploymentCommand(s, sub)
	log, err := parseWithLogger(s, logc, args)
	if err != nil {
		return err
	}
	defer log.Sync()
	if dep.Name == "" {
		return errors.New("OCTFLOW_DEPLOYMENT is empty: unversioned workers have no deployment to manage")
	}
	sealer, err := app.Codec(*keys)
	if err != nil {
		return err
	}
	dc, fc := codec.Converters(sealer)
	c, err := app.Dial(ctx, app.DialOptions{HostPort: tc.Addr, Namespace: tc.Namespace,
		Identity: "deployment@" + hostname(), Logger: log.Named("sdk"), TLS: temporalTLS.Config()})
	if err != nil {
		return err
	}
	defer c.Close()
	m := deployment.Manager{Client: c, Name: dep.Name, Identity: "octflow deployment " + sub + "@" + hostname()}
	gate := deployment.Gate{Client: c, Deployment: dep.Name, BuildID: dep.BuildID, DataConverter: dc, FailureConverter: fc, Logger: log,
		Register: func(r worker.WorkflowRegistry) error { return workflows.Register(r, activities.Pipeline().Specs()) }}
	op := deploymentOp{m: m, gate: gate, own: build, out: os.Stdout, log: log}
	switch sub {
	case "status":
		return op.status(ctx)
	case "promote":
		return op.promote(ctx, dep.BuildID, cmd.Wait, cmd.IfNone)
	case "ramp":
		return op.ramp(ctx, dep.BuildID, float32(cmd.Percent), cmd.Wait)
	case "rollback":
		return op.rollback(ctx, dep.BuildID)
	default:
		return op.retire(ctx, dep.BuildID, cmd.Delete)
	}
}

// deploymentOp runs one deployment command.
type deploymentOp struct {
	m    deployment.Manager
	gate deployment.Gate
	// own is this binary's build ID: the gate replays against its code.
	own string
	out io.Writer
	log *zap.Logger
}

func (o deploymentOp) status(ctx context.Context) error {
	st, err := o.m.Status(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "deployment %s (this binary: %s)\n", st.Name, o.own)
	w := tabwriter.NewWriter(o.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BUILD\tROUTING\tWORKERS\tRUNNING\tDRAINAGE\tCREATED")
	for _, v := range st.Versions {
		routing := "-"
		switch {
		case v.Current:
			routing = "current"
		case v.Ramping:
			routing = fmt.Sprintf("ramping %v%%", v.RampPercent)
		}
		workers := "never"
		if v.Polled {
			workers = "polled" // Temporal keeps a version's queues after its workers stop
		}
		running := fmt.Sprint(v.Running)
		if v.Running < 0 {
			running = "?"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", v.BuildID, routing, workers, running, dash(v.Drainage), v.Created.UTC().Format(time.RFC3339))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if cur := st.Current(); cur != "" {
		return o.unmoved(ctx, cur)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// judge runs the replay gate for build, which must be this binary's.
func (o deploymentOp) judge(ctx context.Context, build string) error {
	if build != o.own {
		return fmt.Errorf("this binary is build %s, not %s: run the command from the image of the build it promotes, whose code the replay gate replays the running histories against", o.own, build)
	}
	v, err := o.gate.Check(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "replay gate: %d running workflows replayed against build %s, %d of which would run on it\n", v.Replayed, build, v.Movers)
	for _, r := range v.Stay {
		fmt.Fprintf(o.out, "  stays on its build (it could not move to this one): %s\n", r)
	}
	if !v.Passed() {
		for _, r := range v.Refusals {
			fmt.Fprintf(o.out, "  REFUSED: %s\n", r)
		}
		return fmt.Errorf("%w: %d running workflows would run on it and do not replay", deployment.ErrRefused, len(v.Refusals))
	}
	return nil
}

func (o deploymentOp) waitPolled(ctx context.Context, build string, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return o.m.WaitPolled(wctx, build, time.Second)
}

func (o deploymentOp) promote(ctx context.Context, build string, wait time.Duration, ifNone bool) error {
	if err := o.waitPolled(ctx, build, wait); err != nil {
		return err
	}
	if ifNone {
		st, err := o.m.Status(ctx)
		if err != nil {
			return err
		}
		if cur := st.Current(); cur != "" {
			fmt.Fprintf(o.out, "deployment %s already runs build %s: left as it is (promote without --if-none to move it)\n", o.m.Name, cur)
			return nil
		}
	}
	if err := o.judge(ctx, build); err != nil {
		return err
	}
	prev, err := o.m.Promote(ctx, build)
	if err != nil {
		return err
	}
	if prev == "" {
		prev = "none"
	}
	fmt.Fprintf(o.out, "build %s is current (was %s): new exams start on it; exams and reviews already running finish on their build\n", build, prev)
	return o.unmoved(ctx, build)
}

// unmoved says which long-running workflows (fleet, inboxes) are not yet
// on build, the current one. Each stays pinned to its build until it
// continues as new, and only that build's workers serve it meanwhile.
func (o deploymentOp) unmoved(ctx context.Context, build string) error {
	left, err := o.m.Unmoved(ctx, build)
	if err != nil {
		return err
	}
	if len(left) == 0 {
		fmt.Fprintf(o.out, "the fleet and the inboxes run on build %s\n", build)
		return nil
	}
	fmt.Fprintf(o.out, "NOT YET MOVED to build %s: %s; each moves at its next event, served meanwhile only by its own build's workers: keep them running until 'octflow deployment status' says these moved\n",
		build, strings.Join(left, ", "))
	return nil
}

func (o deploymentOp) ramp(ctx context.Context, build string, percent float32, wait time.Duration) error {
	if percent > 0 {
		if err := o.waitPolled(ctx, build, wait); err != nil {
			return err
		}
		if err := o.judge(ctx, build); err != nil {
			return err
		}
	}
	if err := o.m.Ramp(ctx, build, percent); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "build %s takes %v%% of new exams\n", build, percent)
	return nil
}

func (o deploymentOp) rollback(ctx context.Context, build string) error {
	prev, err := o.m.Rollback(ctx, build)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "build %s is current again (was %s): new exams start on it; exams running on %s finish there\n", build, prev, prev)
	return o.unmoved(ctx, build)
}

func (o deploymentOp) retire(ctx context.Context, build string, del bool) error {
	r, err := o.m.Retirable(ctx, build)
	if err != nil {
		return err
	}
	if !r.MayGo {
		fmt.Fprintf(o.out, "build %s may not go yet: %s\n", build, r.Why)
		return exitCode(3)
	}
	if !del {
		fmt.Fprintf(o.out, "build %s may go: stop its workers, then run retire --delete\n", build)
		return nil
	}
	if err := o.m.Delete(ctx, build); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "build %s removed from deployment %s\n", build, o.m.Name)
	return nil
}
