// Package gpuworker is a GPU node (`octflow gpuworker`): a Temporal
// worker that runs the four image stages on the GPUs of one machine. The
// node that owns the GPUs decides who gets them; there is no central
// table of GPUs that could be wrong. docs/gpu-nodes.md is its prose.
//
// A tour of the node, file by file:
//
//   - node.go: Config and Start. A node serves two task queues, its GPU
//     queue (the shared oct-gpu, or its campus's own for a node bound to
//     one campus) and a queue of its own (exam.NodeQueueOf), where an
//     exam's later GPU stages are sent first because the node keeps
//     their input in its cache; Stop drains it on SIGTERM (running
//     stages finish, nothing new is taken), so a deploy never loses a
//     stage.
//   - gpus.go: the Inventory of GPUs, read through NVML, or simulated
//     GPUs where there is no NVIDIA driver (octflow dev, the tests, the
//     benchmark) running the same code. A GPU with a fault (an Xid
//     error, ECC errors, throttling) is not healthy and takes no stage.
//   - slots.go: Slots, the worker's slot supplier and an activity
//     interceptor in one. A node takes one stage per queue more than it
//     has free, healthy GPUs; each stage then takes a free GPU with
//     enough memory for its kind only while it computes (its input is
//     read before, its output stored after), and a freed GPU goes to
//     urgent stages first, then to exams already under way on the node.
//   - breaker.go: Breaker, the node's circuit breaker over its recent
//     stage outcomes. While it is open Slots grants nothing, so the node
//     stops polling and the shared queue flows to healthy nodes; a
//     half-open probe or an admin's reset closes it.
//   - report.go: every 10 s (Config.ReportEvery) the node tells the
//     fleet workflow its GPUs, stages in flight, breaker and pace, then
//     reads and applies what the fleet holds for it (the breaker resets
//     an admin asked for; whether it is degraded, when it takes no new
//     stage): the node needs no inbound port.
//   - pace.go: Pace, the node's own figures (a probe timed at every
//     report, each stage's compute time) for the fleet's judgement of
//     gray nodes: slow but never failing (workflows.Judge).
//   - takes.go: Takes, a note on local disk of the stage attempts the
//     node holds, so a node restarted after a crash hands them back to
//     Temporal at once instead of leaving them to the heartbeat timeout.
//
// The stages themselves are activities.Activities, which the node binds
// to its own part (activities.GPUNode); this package decides where and
// when they run, not what they compute.
package gpuworker
