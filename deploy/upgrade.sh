#!/usr/bin/env bash
# deploy/upgrade.sh: a new octflow release on the compose stack with exams
# in flight, by Worker Versioning (docs/operations.md, Upgrades):
#
#   deploy/upgrade.sh start IMAGE   the new release's worker (worker-next)
#                                   beside the old one; its build promoted
#                                   after the replay gate (new exams start
#                                   on it); then the GPU nodes moved to
#                                   IMAGE one at a time, each drained
#                                   first, so GPU capacity never drops to
#                                   zero
#   deploy/upgrade.sh status        the deployment's builds, what each runs
#   deploy/upgrade.sh rollback      the old build current again (its
#                                   worker still runs): new exams start on
#                                   it; those started on the new build
#                                   finish there
#   deploy/upgrade.sh abort         after a rollback, once the new build
#                                   runs nothing: worker-next removed, the
#                                   GPU nodes back on the old image one at
#                                   a time, the new build removed
#   deploy/upgrade.sh finish        once the old build may go (no exam,
#                                   review or export pinned to it still
#                                   open): every service on IMAGE, the old
#                                   worker and worker-next replaced by the
#                                   worker on IMAGE, the old build removed
#
# Between start and finish, change the stack only through this script: a
# plain `up` would move the old worker to the new image before its exams
# and reviews end. start records IMAGE and the old build in .env
# (OCTFLOW_NEXT_IMAGE, OCTFLOW_PREVIOUS_BUILD); finish moves
# OCTFLOW_IMAGE to IMAGE and removes them.
#
# OCTFLOW_COMPOSE names the Compose command (default "docker compose");
# COMPOSE_FILE and COMPOSE_PROJECT_NAME are Compose's own.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
read -r -a COMPOSE <<<"${OCTFLOW_COMPOSE:-docker compose}"
WAIT=${OCTFLOW_WAIT_TIMEOUT:-300}

say() { printf 'upgrade: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}
usage() {
	sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
	exit 2
}
env_get() { [ -f .env ] && sed -n "s/^$1=//p" .env | tail -1; }
env_set() { # KEY VALUE ("" removes it)
	touch .env
	sed -i "/^$1=/d" .env
	[ -z "$2" ] || printf '%s=%s\n' "$1" "$2" >>.env
}
compose() { "${COMPOSE[@]}" "$@"; }
# deployment ARGS…: `octflow deployment` from the new release's image.
deployment() { compose run --rm --no-deps -T worker-next-deployment deployment "$@"; }
# node_ready NODE: the GPU node's own metrics endpoint answers (its
# healthcheck's test) once it runs: over HTTPS, checked with the stack's
# CA, or plain HTTP from a release that serves no TLS there (1.0.0).
node_ready() {
	compose exec -T "$1" sh -c 'curl -fsS -m 5 -o /dev/null --cacert /run/secrets/ca.pem https://127.0.0.1:9464/metrics ||
		curl -fsS -m 5 -o /dev/null http://127.0.0.1:9464/metrics' >/dev/null 2>&1
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
start)
	[ $# = 1 ] || usage
	image=$1
	[ -z "$(env_get OCTFLOW_NEXT_IMAGE)" ] || die "an upgrade to $(env_get OCTFLOW_NEXT_IMAGE) is under way: finish it (or roll it back and finish) first"
	export OCTFLOW_NEXT_IMAGE=$image
	say "starting worker-next on $image beside the running worker"
	compose up -d --no-deps --wait --wait-timeout "$WAIT" worker-next
	say "promoting the new build (after the replay gate)"
	out=$(deployment promote) || {
		printf '%s\n' "$out" >&2
		die "the new build was not promoted; worker-next is left running (stop it: ${COMPOSE[*]} rm -sf worker-next)"
	}
	printf '%s\n' "$out" >&2
	prev=$(sed -n 's/.* is current (was \([^)]*\)).*/\1/p' <<<"$out" | tail -1)
	[ -n "$prev" ] && [ "$prev" != none ] || die "could not tell the previous build from: $out"
	env_set OCTFLOW_NEXT_IMAGE "$image"
	env_set OCTFLOW_PREVIOUS_BUILD "$prev"
	# GPU nodes are in no build (their stages are the contract's): each is
	# moved on its own, and waited for, so the other serves meanwhile.
	for node in $(compose config --services | grep -E '^gpu-[0-9]+$' | sort -V); do
		say "moving $node to $image (it drains its running stage first)"
		OCTFLOW_IMAGE=$image compose up -d --no-deps --wait --wait-timeout "$WAIT" "$node"
		deadline=$(($(date +%s) + WAIT))
		until node_ready "$node"; do
			[ "$(date +%s)" -lt "$deadline" ] || die "$node did not come back within $WAIT s"
			sleep 2
		done
	done
	say "done: new exams start on the new build; the old build ($prev) keeps its exams and reviews. Run '$0 finish' once '$0 status' shows it running none."
	;;
status)
	[ -n "$(env_get OCTFLOW_NEXT_IMAGE)" ] && export OCTFLOW_NEXT_IMAGE=$(env_get OCTFLOW_NEXT_IMAGE)
	deployment status
	;;
rollback)
	image=$(env_get OCTFLOW_NEXT_IMAGE) prev=$(env_get OCTFLOW_PREVIOUS_BUILD)
	[ -n "$image" ] && [ -n "$prev" ] || die "no upgrade under way (.env has no OCTFLOW_NEXT_IMAGE / OCTFLOW_PREVIOUS_BUILD)"
	export OCTFLOW_NEXT_IMAGE=$image
	deployment rollback --build-id "$prev"
	say "new exams start on $prev again; exams and reviews of the new build finish on worker-next, which stays until they end"
	;;
finish)
	image=$(env_get OCTFLOW_NEXT_IMAGE) prev=$(env_get OCTFLOW_PREVIOUS_BUILD)
	[ -n "$image" ] && [ -n "$prev" ] || die "no upgrade under way (.env has no OCTFLOW_NEXT_IMAGE / OCTFLOW_PREVIOUS_BUILD)"
	export OCTFLOW_NEXT_IMAGE=$image
	deployment retire --build-id "$prev" || die "the old build $prev may not go yet (above); run finish again later"
	env_set OCTFLOW_IMAGE "$image"
	say "every service to $image; the worker on the new build replaces the old"
	OCTFLOW_IMAGE=$image compose up -d --wait --wait-timeout "$WAIT"
	compose rm -sf worker-next
	deployment retire --build-id "$prev" --delete ||
		say "Temporal still counts the old worker's last polls: delete $prev later (octflow deployment retire --build-id $prev --delete)"
	env_set OCTFLOW_NEXT_IMAGE ""
	env_set OCTFLOW_PREVIOUS_BUILD ""
	say "done: the stack runs $image"
	;;
abort)
	image=$(env_get OCTFLOW_NEXT_IMAGE) prev=$(env_get OCTFLOW_PREVIOUS_BUILD)
	[ -n "$image" ] && [ -n "$prev" ] || die "no upgrade under way (.env has no OCTFLOW_NEXT_IMAGE / OCTFLOW_PREVIOUS_BUILD)"
	export OCTFLOW_NEXT_IMAGE=$image
	# retire with no --build-id judges the image's own build: the new one.
	deployment retire || die "the new build may not go yet (above): roll back first, and wait for its exams and reviews to end"
	compose rm -sf worker-next
	for node in $(compose config --services | grep -E '^gpu-[0-9]+$' | sort -V); do
		say "moving $node back to the old image"
		compose up -d --no-deps --wait --wait-timeout "$WAIT" "$node"
	done
	deployment retire --delete || say "Temporal still counts worker-next's last polls: delete its build later (octflow deployment retire --delete, from $image)"
	env_set OCTFLOW_NEXT_IMAGE ""
	env_set OCTFLOW_PREVIOUS_BUILD ""
	say "done: the stack runs the old release only"
	;;
*) usage ;;
esac
