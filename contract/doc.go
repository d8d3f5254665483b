// Package contract is what crosses octflow's workflow boundaries: the
// names of its workflows, queries, updates and signals, the workflow IDs,
// the inputs and outputs that travel through Temporal, and the error
// types a stage fails with. Every process that starts, queries, signals
// or serves a workflow imports it; nobody re-declares these types or
// decodes their payloads by hand.
//
// It holds types, not behaviour: the workflows live in workflows/, the
// stages in activities/, the exam vocabulary in exam/ and the seven
// states in lifecycle/.
package contract
