#!/usr/bin/env bash
# deploy/restore.sh [--no-start] ARCHIVE: the stack back from an archive
# of deploy/backup.sh, onto this directory's stack with its volumes gone
# (a new host with octflow's checkout of the same release, or this one
# after `docker compose down -v`). Run it where docker-compose.yml is, as
# root (it gives the secrets and the volumes' files their owners back).
#
#   1. checks the archive: every part there, each as SHA256SUMS says;
#   2. puts back deploy/secrets/, .env and the site's compose overlays,
#      with their owners and modes, where they are missing (where one
#      exists and differs from the archive's, it stops: that directory
#      belongs to another stack);
#   3. refuses while any container of the stack exists or any of the
#      volumes it restores does (it never writes over data);
#   4. checks the postgresql image runs the PostgreSQL major version the
#      backup was taken from;
#   5. fills the volumes, each made afresh by Compose: PostgreSQL's data
#      directory from the base backup (pg_verifybackup checks every file
#      against the backup's manifest; PostgreSQL replays the WAL in it
#      when it starts), the object store with its extended attributes,
#      the audit journal, trail and queue;
#   6. unless --no-start: docker compose up -d --wait (at most
#      OCTFLOW_WAIT_TIMEOUT seconds, default 600). PostgreSQL starts
#      before Temporal as on every up; Temporal then carries on every
#      exam the backup caught in flight (docs/operations.md, *Backup and
#      restore*).
#
# OCTFLOW_COMPOSE names the Compose command (default "docker compose");
# COMPOSE_FILE and COMPOSE_PROJECT_NAME are Compose's own.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")

# As deploy/backup.sh names them.
VOLUMES="postgresql s3 audit-spool audit-log audit-queue"
PARTS="MANIFEST postgresql.tar.gz s3.tar.gz audit-spool.tar.gz audit-log.tar.gz audit-queue.tar.gz site.tar.gz"

start=true archive=
usage() {
	echo "usage: $0 [--no-start] ARCHIVE" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--no-start) start=false && shift ;;
	-*) usage ;;
	*)
		[ -z "$archive" ] || usage
		archive=$1 && shift
		;;
	esac
done
[ -n "$archive" ] || usage
T0=$(date +%s)
log() { printf 'restore [%3ds] %s\n' $(($(date +%s) - T0)) "$*" >&2; }
fail() {
	log "FAILED: $*"
	exit 1
}
[ -f "$archive" ] || fail "no archive $archive"
archive=$(cd "$(dirname "$archive")" && pwd)/$(basename "$archive")
cd "$ROOT"

# 1. The archive, whole and as it was written.
work=$(mktemp -d "${TMPDIR:-/tmp}/octflow-restore.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$archive" || fail "$archive is not a whole tar file"
set -- "$work"/octflow-backup-*/
if [ $# != 1 ] || [ ! -d "$1" ]; then
	fail "$archive does not hold one octflow-backup-* directory"
fi
d=${1%/}
for p in $PARTS SHA256SUMS; do
	[ -s "$d/$p" ] || fail "the archive lacks $p"
done
(cd "$d" && sha256sum --quiet -c SHA256SUMS) >&2 || fail "the archive's parts do not match its SHA256SUMS: it is damaged"
for p in $PARTS; do
	grep -q " \(\./\)\?$p\$" "$d/SHA256SUMS" || fail "SHA256SUMS does not cover $p"
done
log "$(basename "$d"): every part as SHA256SUMS says"

# 2. The site's files: put back where missing, identical where present.
mkdir -p "$work/site"
tar -C "$work/site" -xpzf "$d/site.tar.gz" || fail "site.tar.gz"
[ -d "$work/site/deploy/secrets" ] || fail "site.tar.gz holds no deploy/secrets"
for f in deploy/secrets .env docker-compose.gpu.yml docker-compose.override.yml; do
	[ -e "$work/site/$f" ] || continue
	if [ -e "$f" ]; then
		diff -r "$work/site/$f" "$f" >/dev/null ||
			fail "$ROOT/$f exists and differs from the backup's: it belongs to another stack; move it away and run this again"
	else
		[ "$f" = deploy/secrets ] || cp -p "$work/site/$f" "$f"
		[ "$f" != deploy/secrets ] || cp -a "$work/site/deploy/secrets" deploy/secrets
		log "put back $f"
	fi
done

read -r -a compose <<<"${OCTFLOW_COMPOSE:-docker compose}"
dc() { "${compose[@]}" "$@"; }

# 3. Nothing to write over.
config=$(dc config) || fail "docker compose config"
project=$(awk '/^name:/ && !n { print $2; n = 1 }' <<<"$config")
[ -n "$project" ] || fail "no project name in docker compose config"
# volume KEY: the Docker volume the stack's volume KEY is.
volume() {
	awk -v key="$1" '
		/^[^ ]/ { top = $0 }
		top == "volumes:" && /^  [^ ]/ { cur = $1; sub(/:$/, "", cur) }
		top == "volumes:" && cur == key && /^    name:/ { print $2 }' <<<"$config"
}
[ -z "$(dc ps -a -q)" ] || fail "the stack $project has containers: take it down (docker compose down) before a restore"
there=
for v in $VOLUMES; do
	n=$(volume "$v")
	[ -n "$n" ] || fail "docker compose config has no volume $v"
	! docker volume inspect "$n" >/dev/null 2>&1 || there="$there $n"
done
[ -z "$there" ] || fail "the volume(s)$there exist: a restore makes them afresh and never writes over data; remove them (docker volume rm$there) if they are to go"

# 4. The same PostgreSQL major version.
pgv=$(tar -xzOf "$d/postgresql.tar.gz" PG_VERSION) || fail "postgresql.tar.gz has no PG_VERSION"
image=$(dc run --rm --no-deps -T --entrypoint postgres postgresql --version 2>/dev/null | awk '{ print $3 }') ||
	fail "could not run the postgresql image"
[ "${image%%.*}" = "$pgv" ] ||
	fail "the backup is of PostgreSQL $pgv and the postgresql image runs $image: restore with the image it was taken with, then upgrade"

# 5. The volumes, made as Compose makes them (its labels: up then
# takes them for the stack's own), each filled as root in a one-off
# container of the postgresql service's image (GNU tar, extended
# attributes).
for v in $VOLUMES; do
	docker volume create --label "com.docker.compose.project=$project" --label "com.docker.compose.volume=$v" \
		"$(volume "$v")" >/dev/null || fail "docker volume create $(volume "$v")"
done
into() { # VOLUME PART
	gzip -dc "$d/$2" | dc run --rm --no-deps -T -u 0 --entrypoint tar -v "$(volume "$1"):/restore/$1" postgresql \
		--xattrs --xattrs-include='*' --numeric-owner -xpf - -C "/restore/$1" || fail "restoring the volume $1"
}
log "PostgreSQL $pgv: the base backup into the postgresql volume"
# shellcheck disable=SC2016 # the container's shell expands them
gzip -dc "$d/postgresql.tar.gz" | dc run --rm --no-deps -T -u 0 --entrypoint sh postgresql -ec '
	data=${PGDATA:-/var/lib/postgresql/data}
	[ -z "$(ls -A "$data")" ] || { echo "$data is not empty" >&2; exit 1; }
	tar -xf - -C "$data"
	chown -R postgres:postgres "$data"
	chmod 700 "$data"
	# Every file as the backup manifest says, and the WAL it needs there.
	pg_verifybackup -q "$data"' || fail "restoring PostgreSQL's data directory"
for v in s3 audit-spool audit-log audit-queue; do
	log "the $v volume"
	into "$v" "$v.tar.gz"
done
log "restored $(basename "$d") into the volumes of $project"

# 6. Up.
if $start; then
	log "docker compose up -d --wait"
	dc up -d --wait --wait-timeout "${OCTFLOW_WAIT_TIMEOUT:-600}" >&2 || fail "the stack did not come up healthy: docker compose ps, docker compose logs"
	log "the stack is up"
else
	log "next: docker compose up -d --wait"
fi
