// Package lifecycle owns an exam's seven states: their names, the table
// of legal transitions, and how they follow from what Temporal records.
//
// The states are never stored a second time. The pipeline workflow
// checks each move it makes itself (a stage scheduled, a promotion, the
// report done, the exam dead) against the table; the moves only the
// server sees (a worker claiming a stage, its heartbeats) come from the
// workflow history and the pending activity. How a try ended is never
// worked out again here: the workflow names a retry's wait by the
// record of the try it follows (contract.RetrySummary), its result
// carries a failed notification's, and a DEAD run's failure says why.
// Fold turns all of it into one Record: the exam's timeline and where
// it stands now, so the API's status and its timeline can never
// disagree.
//
// Payloads (stage outputs, heartbeats, failure details, review requests,
// results) are decoded with the converters the Temporal client uses, so
// a payload codec applies here as everywhere else.
package lifecycle
