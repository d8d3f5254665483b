// Package composetest holds the compose stack's test on a real Docker
// Engine (run.sh, `make compose-test`) and, here, a static check that runs
// with the unit tests: every healthcheck and entrypoint of
// docker-compose.yml names a program its image holds, read from the
// Dockerfiles of the pinned official images where they are in the module
// cache (Temporal's server and admin tools, the Temporal UI, versitygw)
// and from this repository's Dockerfile.
package composetest
