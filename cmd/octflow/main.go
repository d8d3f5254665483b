// Command octflow is the one binary of the OCT exam scheduler:
//
//	octflow dev        the whole system in one process (embedded Temporal, Web UI, S3)
//	octflow api        the HTTP gateway
//	octflow worker     the workflow worker and CPU stages (report, notify)
//	octflow gpuworker  a GPU node serving the image stages
//	octflow setup      register the Temporal namespace and search attributes
//	octflow submit     send a scan to the API (for operators and demos)
//	octflow phantom    write a synthetic macular OCT cube as DICOM
//	octflow node-keys  the payload keys of a GPU node bound to some campuses
//
// Every flag has an OCTFLOW_* environment variable; see docs/configuration.md.
package main

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

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmds := map[string]func(context.Context, []string) error{
		"dev":       runDev,
		"api":       runAPI,
		"worker":    runWorker,
		"gpuworker": runGPUWorker,
		"setup":     runSetup,
		"submit":    runSubmit,
		"phantom":   runPhantom,
		"bench":     runBench,
		"node-keys": runNodeKeys,
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		usage()
		os.Exit(2)
	}
	if err := cmd(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		var exit exitCode
		if errors.As(err, &exit) {
			os.Exit(int(exit))
		}
		fmt.Fprintln(os.Stderr, "octflow:", err)
		os.Exit(1)
	}
}

// exitCode ends the process with a status and no further message.
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
