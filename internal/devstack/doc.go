// Package devstack runs, inside one process and on loopback, everything
// octflow needs around it: a real Temporal server on SQLite file persistence
// (or on a PostgreSQL server it is pointed at), the Temporal Web UI and an
// S3 endpoint (versitygw's embedded gateway on its posix backend). It backs
// `octflow dev` and the integration tests.
//
// It is the only package that imports go.temporal.io/server.
package devstack
