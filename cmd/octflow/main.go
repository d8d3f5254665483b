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
//	octflow admin      mint, revoke and list the api's tokens (admin token …)
//	octflow deployment Worker Versioning: status, promote, ramp, rollback, retire
//	octflow version    this build's version, commit and build ID
//
// Every flag has an OCTFLOW_* environment variable; see docs/configuration.md.
// The commands live in internal/cli; the end-to-end tests in e2e.
package main

import (
	"os"

	"octflow/cmd/octflow/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
