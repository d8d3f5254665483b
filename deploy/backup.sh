#!/usr/bin/env bash
# deploy/backup.sh [--out DIR] [--keep N]: a backup of the running compose
# stack, taken online (exams keep running), into one archive
#
#   DIR/octflow-backup-<UTC time>.tar    (default DIR: backups/ next to
#                                        docker-compose.yml; mode 0600)
#
# whose path it prints last on its standard output. Run it where
# docker-compose.yml is, as root (it reads the secrets, which belong to
# the services' users). It holds, in this order (docs/operations.md,
# *Backup and restore*, says why this order is consistent):
#
#   postgresql.tar.gz  the whole PostgreSQL cluster (Temporal's databases
#                      temporal and temporal_visibility, its role), one
#                      consistent snapshot taken by pg_basebackup as the
#                      superuser postgres over the container's own socket,
#                      with the WAL it needs;
#   s3.tar.gz          the object store's volume (versitygw's posix
#                      backend) with its extended attributes, where
#                      versitygw keeps each object's ETag, checksums and
#                      content type and the bucket's policy and owner;
#   audit-spool.tar.gz the api's audit journal (what the collector has not
#                      taken yet), copied with the api paused (about a
#                      second), so no entry is torn;
#   audit-log.tar.gz, audit-queue.tar.gz
#                      the audit collector's trail and its queue, copied
#                      with the collector paused (the api keeps its
#                      entries meanwhile and sends them after);
#   site.tar.gz        deploy/secrets/ (keys, certificates, passwords,
#                      tokens, node accounts), .env and the site's compose
#                      overlays (docker-compose.gpu.yml,
#                      docker-compose.override.yml) where they exist;
#   MANIFEST           what was taken, when, from what; SHA256SUMS of
#                      every part (deploy/restore.sh checks them).
#
# Not kept: Prometheus's, Alertmanager's and Grafana's volumes (metrics
# history, silences; a restored stack starts them empty), disk-watch
# (empty: node-exporter reads the free space under it), upload-spool
# (uploads in flight, encrypted with keys that live only in their
# requests; the api clears it at start) and gpu-takes (the GPU nodes'
# notes of stages they hold: a restored stack's stages are retried
# anyway).
#
# Every step is checked; on any failure it exits non-zero, unpauses what
# it paused and leaves no archive (never an empty or partial one). --keep
# N then removes all but the newest N archives in DIR. The archive holds
# every secret of the stack: keep it as you keep deploy/secrets/.
#
# OCTFLOW_COMPOSE names the Compose command (default "docker compose");
# COMPOSE_FILE and COMPOSE_PROJECT_NAME are Compose's own, as for any
# `docker compose` here.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"

# The volumes backed up, and those that are not (a Go test checks that
# together they are every volume of docker-compose.yml).
BACKED_UP="postgresql s3 audit-spool audit-log audit-queue"
NOT_BACKED_UP="prometheus alertmanager grafana disk-watch upload-spool gpu-takes"
: "$NOT_BACKED_UP"

out=$ROOT/backups keep=
usage() {
	echo "usage: $0 [--out DIR] [--keep N]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--out | --keep)
		[ $# -ge 2 ] || usage
		if [ "$1" = --out ]; then out=$2; else keep=$2; fi
		shift 2
		;;
	*) usage ;;
	esac
done
[ -n "$out" ] || usage
case "$keep" in '' | *[!0-9]* | 0) [ -z "$keep" ] || usage ;; esac

T0=$(date +%s)
log() { printf 'backup [%3ds] %s\n' $(($(date +%s) - T0)) "$*" >&2; }
fail() {
	log "FAILED: $*"
	exit 1
}
read -r -a compose <<<"${OCTFLOW_COMPOSE:-docker compose}"
dc() { "${compose[@]}" "$@"; }

[ -d deploy/secrets ] || fail "no deploy/secrets/ next to $ROOT/docker-compose.yml: run this where the stack was set up"
for v in $BACKED_UP; do
	[ "$v" = postgresql ] || [ "$v" = s3 ] || [ "${v#audit-}" != "$v" ] || fail "backup.sh does not know how to copy the volume $v"
done
config=$(dc config) || fail "docker compose config: run this where docker-compose.yml and its .env are"
# volume KEY: the Docker volume the stack's volume KEY is.
volume() {
	awk -v key="$1" '
		/^[^ ]/ { top = $0 }
		top == "volumes:" && /^  [^ ]/ { cur = $1; sub(/:$/, "", cur) }
		top == "volumes:" && cur == key && /^    name:/ { print $2 }' <<<"$config"
}
for v in $BACKED_UP; do
	n=$(volume "$v")
	if [ -z "$n" ] || ! docker volume inspect "$n" >/dev/null 2>&1; then
		fail "the stack has no volume $v (${n:-not in docker compose config})"
	fi
done
running() { [ -n "$(dc ps --status running -q "$1" 2>/dev/null)" ]; }
for s in postgresql s3 api audit; do
	running "$s" || fail "the service $s is not running: back up a running stack (docker compose up -d --wait)"
done

stamp=$(date -u +%Y%m%dT%H%M%SZ)
name=octflow-backup-$stamp
mkdir -p "$out"
out=$(cd "$out" && pwd)
umask 077
work=$out/.$name.partial
rm -rf "$work"
mkdir -p "$work/$name"
paused=
cleanup() {
	local rc=$?
	if [ -n "$paused" ]; then
		dc unpause "$paused" >/dev/null 2>&1 || log "could not unpause $paused: run docker compose unpause $paused"
	fi
	rm -rf "$work" "$out/.$name.tar"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
d=$work/$name
manifest=$d/MANIFEST
note() { printf '%s\n' "$*" >>"$manifest"; }
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
note "octflow backup $name"
note "host: $(hostname)"
note "directory: $ROOT"
note "images: $(for s in api postgresql s3; do printf '%s=%s ' "$s" "$(docker inspect -f '{{.Config.Image}}' "$(dc ps -q "$s")")"; done)"

# tar_volume VOLUME FILE: the stack's volume VOLUME, with owners, modes
# and extended attributes, as FILE (gzip). GNU tar in a one-off container
# of the postgresql service's image (Debian's; versitygw's image has
# busybox's tar, which keeps no extended attributes), the volume mounted
# read-only. Exit 1 from tar (a file changed or went while it was read,
# as versitygw writes and deletes beside the copy) is expected; more is
# a failure.
tar_volume() {
	local rc=0
	dc run --rm --no-deps -T -u 0 --entrypoint tar -v "$(volume "$1"):/backup/$1:ro" postgresql \
		--xattrs --xattrs-include='*' --numeric-owner -C "/backup/$1" -cf - . 2>"$d/.tar-$1.err" | gzip -1 >"$2" ||
		rc=${PIPESTATUS[0]}
	if [ "$rc" -gt 1 ]; then
		cat "$d/.tar-$1.err" >&2
		fail "copying the volume $1 (tar exit $rc)"
	fi
	[ "$rc" = 0 ] || note "  $1: tar exit 1: $(grep -c . "$d/.tar-$1.err") file(s) changed or went while they were read (written after the PostgreSQL snapshot: see docs/operations.md)"
	rm -f "$d/.tar-$1.err"
	gzip -t "$2" || fail "the copy of $1 is not a whole gzip file"
}

# 1. PostgreSQL: one snapshot of the whole cluster, both of Temporal's
# databases at the same instant.
note "postgresql: pg_basebackup of the cluster, begun $(now)"
log "PostgreSQL: pg_basebackup as postgres"
dc exec -T -u postgres postgresql pg_basebackup -U postgres --no-password -D - -F tar -X fetch --checkpoint=fast \
	--label "$name" 2>"$d/.pg.err" | gzip -1 >"$d/postgresql.tar.gz" || {
	cat "$d/.pg.err" >&2
	fail "pg_basebackup"
}
rm -f "$d/.pg.err"
pgv=$(tar -xzOf "$d/postgresql.tar.gz" PG_VERSION) || fail "the PostgreSQL backup has no PG_VERSION"
tar -tzf "$d/postgresql.tar.gz" >"$d/.pg.list" || fail "the PostgreSQL backup is not a whole tar file"
if ! grep -qx 'backup_label' "$d/.pg.list" || ! grep -q '^pg_wal/[0-9A-F]\{24\}$' "$d/.pg.list"; then
	fail "the PostgreSQL backup lacks its backup_label or its WAL"
fi
rm -f "$d/.pg.list"
note "postgresql: PostgreSQL $pgv, ended $(now)"

# 2. The object store, after the snapshot: every object an exam in the
# snapshot has written is there (objects are written before Temporal
# records the stage that wrote them, and never changed after).
log "objects: the s3 volume with its extended attributes"
note "s3: begun $(now)"
tar_volume s3 "$d/s3.tar.gz"
tar -tzf "$d/s3.tar.gz" >/dev/null || fail "the copy of s3 is not a whole tar file"
note "s3: ended $(now)"

# 3. The audit trail: the api's journal first, then the collector's file;
# an entry taken by the collector between the two is in both, so a
# restored stack sends it again: at least once, never lost.
log "audit: the api's journal (api paused), then the collector's trail (collector paused)"
paused=api
dc pause api >/dev/null 2>&1 || fail "docker compose pause api"
note "audit-spool: api paused $(now)"
tar_volume audit-spool "$d/audit-spool.tar.gz"
dc unpause api >/dev/null 2>&1 || fail "docker compose unpause api"
paused=
note "audit-spool: api unpaused $(now)"
paused=audit
dc pause audit >/dev/null 2>&1 || fail "docker compose pause audit"
note "audit-log, audit-queue: collector paused $(now)"
tar_volume audit-log "$d/audit-log.tar.gz"
tar_volume audit-queue "$d/audit-queue.tar.gz"
dc unpause audit >/dev/null 2>&1 || fail "docker compose unpause audit"
paused=
note "audit-log, audit-queue: collector unpaused $(now)"

# 4. The site's own files.
log "site: deploy/secrets, .env, compose overlays"
site=(deploy/secrets)
for f in .env docker-compose.gpu.yml docker-compose.override.yml; do
	[ ! -e "$f" ] || site+=("$f")
done
tar --numeric-owner -czf "$d/site.tar.gz" "${site[@]}" || fail "copying ${site[*]}"
note "site: ${site[*]}"

# The manifest's list of parts, the checksums, and the archive.
note "parts (bytes):"
(cd "$d" && for f in postgresql.tar.gz s3.tar.gz audit-spool.tar.gz audit-log.tar.gz audit-queue.tar.gz site.tar.gz; do
	printf '  %s %s\n' "$f" "$(stat -c %s "$f")"
done) >>"$manifest"
note "finished $(now)"
(cd "$d" && sha256sum MANIFEST ./*.tar.gz >SHA256SUMS) || fail "sha256sum"
tar -C "$work" -cf "$out/.$name.tar" "$name" || fail "writing the archive"
mv "$out/.$name.tar" "$out/$name.tar"
log "wrote $out/$name.tar ($(($(stat -c %s "$out/$name.tar") / 1024)) KiB)"

if [ -n "$keep" ]; then
	# The archives' names sort by time.
	old=$(find "$out" -maxdepth 1 -name 'octflow-backup-*.tar' -printf '%f\n' | sort -r | tail -n +"$((keep + 1))")
	for f in $old; do
		rm -f "$out/$f"
		log "removed $f (--keep $keep)"
	done
fi
echo "$out/$name.tar"
