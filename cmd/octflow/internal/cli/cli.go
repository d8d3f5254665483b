// Package cli is the octflow command's subcommands, one file each (dev,
// api/worker/gpuworker in serve.go, setup, submit, phantom, bench,
// node-keys, admin), and Main, which dispatches to them: cmd/octflow's main is
// Main(os.Args[1:]), and the end-to-end tests (cmd/octflow/e2e) run Main
// in the child processes they start from their own test binary.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"octflow/config"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// Main runs the octflow command named by args[0] with the rest of args
// as its flags, until it returns or SIGINT or SIGTERM cancels its
// context, and returns the process's exit status: 0 when it succeeded, 2
// for a help request or an unknown command (after the usage), the status
// an exitCode carries, or 1 after printing the error.
func Main(args []string) int {
	if len(args) < 1 {
		usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmds := map[string]func(context.Context, []string) error{
		"dev":        runDev,
		"api":        runAPI,
		"worker":     runWorker,
		"gpuworker":  runGPUWorker,
		"setup":      runSetup,
		"submit":     runSubmit,
		"phantom":    runPhantom,
		"bench":      runBench,
		"node-keys":  runNodeKeys,
		"deployment": runDeployment,
		"version":    runVersion,
		"admin":      runAdmin,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		usage()
		return 2
	}
	if err := cmd(ctx, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		var exit exitCode
		if errors.As(err, &exit) {
			return int(exit)
		}
		fmt.Fprintln(os.Stderr, "octflow:", err)
		return 1
	}
	return 0
}

// exitCode is the exit status Main returns, with no further message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func usage() {
	fmt.Fprint(os.Stderr, `usage: octflow <command> [flags]

commands:
  dev        run the whole system in one process (embedded Temporal, Web UI, S3)
  api        run the HTTP gateway
  worker     run the workflow worker and CPU stages
  gpuworker  run a GPU node
  setup      register the Temporal namespace and search attributes (idempotent)
  submit     submit a scan to the API
  phantom    write a synthetic macular OCT cube as DICOM
  bench      run the scheduling benchmark on an embedded system (simulated GPU mode)
  node-keys  write the payload keys of a GPU node bound to some campuses
  deployment Worker Versioning: status, promote, ramp, rollback, retire (docs/operations.md, Upgrades)
  version    print this build's version, commit and build ID
  admin      the operator's commands: admin token mint, revoke, list (tokens.json)

run 'octflow <command> -h' for its flags.
`)
}

// parseWithLogger reads a command's flags and variables, checks them, and
// returns the logger they configure; the caller syncs it.
func parseWithLogger(s *config.Set, logc *config.Log, args []string) (*zap.Logger, error) {
	if err := s.Parse(args); err != nil {
		return nil, err
	}
	return logc.Logger()
}
