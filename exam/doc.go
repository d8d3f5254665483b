// Package exam is octflow's shared vocabulary: what an exam is, its
// priority buckets, its pipeline stages, its seven states and their legal
// transitions, the Temporal task queues and the object keys every stage
// reads and writes. Everything else imports it; it imports nothing of
// octflow's.
package exam
