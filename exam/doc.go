// Package exam is octflow's shared vocabulary: what an exam is, who may
// name it, how urgent it is, which stages it goes through, where each
// stage reads and writes, and the policy that schedules it. Everything
// else imports it; it imports nothing of octflow's.
//
// # A tour
//
// Start with [Submission]: one exam as a device sent it (its [Ref] — the
// campus and the exam's pseudonymous ID — its [Priority], eye, scan key
// and digest). [Priority] has three buckets, urgent, normal and low;
// [Policy] says how the GPU queues share out between them (weights),
// when a waiting stage moves one bucket up ([Policy.AgingAfter]), and
// the retry, timeout and review rules; [DefaultPolicy] is production's.
//
// A [StageSpec] declares a stage: its [Stage] name, its activity, whether
// it needs a GPU and how much of one, and its served-model setting. Each
// stage declares its own where it is implemented (package activities,
// whose Pipeline is their order); a [Pipeline] of them is what the
// workflow's loop, the task queues ([StageSpec.Queue],
// [Policy.StageQueue], [NodeQueue]), the workers' registration, the
// configuration and the metrics are handed. The object keys every stage
// reads and writes are in keys.go ([ObjectKey], [ScanKey],
// [DenoisedKey], …, [ReportJSONKey]), all under the exam's campus, and
// none holds a patient identifier.
//
// The clinician's review ([Decision], [ReviewStatus]) and the GPU
// node's view of its GPUs ([GPU], [BreakerStatus]) are here too, since
// both the API and the workers speak them. An exam's seven states and
// their transition table are not: they are package lifecycle's.
package exam
