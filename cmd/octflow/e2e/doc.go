// Package e2e is octflow's end-to-end tests: the real embedded Temporal
// server and S3 endpoint, the real gateway through its HTTP API, real
// workers and GPU nodes, as `octflow dev` runs them (e2e_test.go's
// harness). Where a test needs the command as its own OS process (GPU
// nodes, `octflow dev`, `octflow api`, the benchmark's nodes), it runs
// this test binary again with OCTFLOW_TEST_AS_MAIN set to the command
// line, and TestMain runs the command (cmd/octflow/internal/cli's Main)
// instead of the tests.
//
// The tests run one after another (the embedded S3 gateway allows one
// instance per process) and read the repository's files (deploy/,
// imaging/testdata/realdata) through paths made absolute when the
// package loads, because a started stack moves the working directory.
// The package has no code of its own: `make test` runs it with
// `go test -p 1 ./cmd/octflow/...`; one test alone is
//
//	go test -count=1 -run TestExamRunsEndToEndToAReportWithPlausibleThickness ./cmd/octflow/e2e
package e2e
