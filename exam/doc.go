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
// [Stages] is the pipeline, declared once: each [StageSpec] names its
// [Stage], its activity and whether it needs a GPU and how much of one.
// The workflow's loop, the task queues ([Stage.Queue], [NodeQueue]), the
// workers' registration and the metrics all read it; the Example
// "pipeline" prints it. The object keys every stage reads and writes are
// in keys.go ([ScanKey], [DenoisedKey], …, [ReportJSONKey]), all under
// the exam's campus, and none holds a patient identifier.
//
// The clinician's review ([Decision], [ReviewStatus]) and the GPU
// node's view of its GPUs ([GPU], [BreakerStatus]) are here too, since
// both the API and the workers speak them. An exam's seven states and
// their transition table are not: they are package lifecycle's.
package exam
