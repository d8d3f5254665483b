// Package bench is the scheduling benchmark behind `octflow bench`: a
// burst of exams through the real HTTP API of a running octflow system
// whose GPU nodes are separate processes in simulated GPU mode (each
// stage, once it holds its GPU, sleeps a drawn GPU time on top of its
// real work on a tiny phantom), with abrupt node kills, transient faults
// and resends. It measures completion, duplicates, queue waits per
// bucket, dispatch latency and the makespan against two bounds: the
// GPU-time limit and a bare Temporal engine running the same burst.
//
// The pieces, in the order a run uses them:
//
//   - Config is the scenario (exams, nodes, GPUs, mix, stage time,
//     faults, kills, resends, seed) and Policy the scheduling policy the
//     exams run under: production's, with retries and lost-node
//     detection in seconds.
//   - System is what the benchmark needs of the system under test: the
//     gateway's URL and tokens, a Temporal client, the environment a GPU
//     node needs to join. The command (RunBenchOnDevSystem in
//     cmd/octflow/internal/cli) gives it a fresh embedded dev system;
//     the benchmark starts and kills the nodes itself.
//   - Run submits the burst, kills and restarts nodes, waits for every
//     exam, reads each exam's timeline and history, runs the bare engine
//     (BareWorkflow: as many workflows of no-op activities) and prints
//     the summary.
//   - Result is what a run measured, with the Build that ran it; `octflow
//     bench --out FILE` writes it as JSON. Results worth keeping go to
//     internal/bench/results/<date>-<commit>.json (see its README.md),
//     and docs/benchmark.md keeps one current baseline table read from
//     them.
//
// The package measures; it does not judge. Its tests pin the parsing of
// the mix and how the GPUs' load is split over the windows; the end-to-end
// run is cmd/octflow/e2e's TestBenchRunsASmallScenario.
package bench
