#!/usr/bin/env bash
# make compose-test: bring the shipped docker-compose.yml up on a real
# Docker Engine on this machine, submit exams through the api's published
# port and see each COMPLETED with one report, then take the stack down.
#
# No image registry can be reached from these machines, so every image is
# built here (deploy/compose-test/images/): a Debian base by debootstrap
# from the Debian mirror apt's sources name, an Alpine-like base (busybox
# as /bin/sh and its applets, CA certificates, tzdata), Temporal's server,
# admin tools and UI and versitygw from their Go modules at the versions
# go.mod pins, PostgreSQL and Prometheus from Debian, and the octflow
# image from the shipped Dockerfile's runtime stage with the host-built
# bin/octflow. deploy/compose-test/compose.test.yml swaps those images in.
#
# It installs what it lacks (Debian: docker.io, debootstrap,
# busybox-static, prometheus, jq, curl, openssl; Docker Compose v2 built
# from its Go module), starts dockerd if none answers, and keeps its
# caches under $OCTFLOW_COMPOSE_CACHE (default /var/cache/octflow-compose):
# the Compose binary, the base rootfs, the Go binaries; Docker's own layer
# cache keeps the images, so a second run rebuilds nothing that did not
# change. OCTFLOW_COMPOSE_KEEP=1 leaves the stack up for a look.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
HERE=$ROOT/deploy/compose-test
CACHE=${OCTFLOW_COMPOSE_CACHE:-/var/cache/octflow-compose}
PROJECT=${OCTFLOW_COMPOSE_PROJECT:-octflow-compose-test}
COMPOSE_VERSION=v2.40.3
SUITE=bookworm
EXAMS=${OCTFLOW_COMPOSE_EXAMS:-4}
export GOTOOLCHAIN=local CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
export PATH="/usr/local/go/bin:$PATH"
T0=$(date +%s)
step() { printf '[compose-test %4ds] %s\n' $(($(date +%s) - T0)) "$*"; }
fail() {
	step "FAIL: $*"
	exit 1
}
mkdir -p "$CACHE"

# --- what it needs from Debian ------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
[ -x /bin/busybox ] && /bin/busybox --list | grep -qx wget || missing+=(busybox-static)
command -v prometheus >/dev/null || missing+=(prometheus)
command -v jq >/dev/null || missing+=(jq)
command -v curl >/dev/null || missing+=(curl)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
	step "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Docker Engine ------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
	step "starting dockerd (log: $CACHE/dockerd.log)"
	setsid dockerd --storage-driver=overlay2 >"$CACHE/dockerd.log" 2>&1 </dev/null &
	for _ in $(seq 60); do
		docker info >/dev/null 2>&1 && break
		sleep 1
	done
	docker info >/dev/null 2>&1 || fail "dockerd did not start; see $CACHE/dockerd.log"
fi

# --- programs built inside a copy of their own Go module ------------------
# modbuild module version package output [ldflags]: `go install …@version`
# refuses modules whose go.mod has exclude or replace directives (Compose),
# and a module's main may need packages octflow's go.sum does not list
# (versitygw's cmd/versitygw); building inside a copy of the module, with
# its own go.mod and go.sum, works for both. Cached by version.
modbuild() {
	local out=$4
	[ -x "$out" ] && return 0
	local dir src=$CACHE/src-$(basename "$1")
	dir=$(cd "$CACHE" && go mod download -json "$1@$2" | jq -r .Dir)
	rm -rf "$src"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	# A build cache of its own, dropped after: the binary is what is kept.
	(cd "$src" && GOCACHE=$CACHE/gocache nice -n 10 go build -trimpath -ldflags "-s -w ${5:-}" -o "$out.tmp" "$3")
	mv "$out.tmp" "$out"
	rm -rf "$src" "$CACHE/gocache"
}
COMPOSE_BIN=$CACHE/docker-compose-$COMPOSE_VERSION
if [ ! -x "$COMPOSE_BIN" ]; then
	step "building Docker Compose $COMPOSE_VERSION from its Go module"
	modbuild github.com/docker/compose/v2 "$COMPOSE_VERSION" ./cmd "$COMPOSE_BIN" \
		"-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION"
fi

# --- the Debian base: debootstrap from the mirror apt already uses --------
debian_mirror() {
	# deb822 sources first, then one-line ones: the first "deb" source
	# whose suites include $SUITE itself.
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		awk -v suite="$SUITE" '
			BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^Types:/) types = $i
					if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris); sub(/[ \t].*/, "", uris) }
					if ($i ~ /^Suites:/) suites = $i " "
				}
				if (types ~ /[ \t]deb([ \t]|$)/ && suites ~ ("[ \t]" suite "[ \t]")) { print uris; exit }
			}' "$f"
	done
	{ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
		awk -v suite="$SUITE" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { if ($(i + 1) == suite) print $i; break } }'
}
if ! docker image inspect octflow-test/debian:$SUITE >/dev/null 2>&1; then
	tarball=$CACHE/base/$SUITE-minbase.tar
	if [ ! -s "$tarball" ]; then
		mirror=$(debian_mirror | sed -n 1p) # not head: with pipefail, its early exit fails the pipe
		[ -n "$mirror" ] || fail "no Debian $SUITE source in /etc/apt/sources.list*"
		step "debootstrap --variant=minbase $SUITE from apt's Debian mirror"
		mkdir -p "$CACHE/base"
		rm -rf "$CACHE/base/rootfs"
		nice -n 10 debootstrap --variant=minbase "$SUITE" "$CACHE/base/rootfs" "$mirror" >"$CACHE/base/debootstrap.log" 2>&1 ||
			fail "debootstrap failed; see $CACHE/base/debootstrap.log"
		rm -rf "$CACHE/base/rootfs/var/cache/apt/archives/"*.deb "$CACHE/base/rootfs/var/lib/apt/lists/"*
		tar -C "$CACHE/base/rootfs" -cf "$tarball.tmp" .
		mv "$tarball.tmp" "$tarball"
		rm -rf "$CACHE/base/rootfs"
	fi
	step "importing the Debian base image"
	docker import "$tarball" octflow-test/debian:$SUITE >/dev/null
fi

# --- Go binaries, built on the host from the modules go.mod pins ---------
step "building bin/octflow and the stand-ins' Go programs (cached by go build)"
mkdir -p "$CACHE/bin"
gobuild() { # output package
	nice -n 10 go build -ldflags "-s -w" -o "$CACHE/bin/$1" "$2" # no -trimpath: share the build cache with bin/octflow
}
nice -n 10 go build -o bin/octflow ./cmd/octflow
gobuild temporal-server go.temporal.io/server/cmd/server
gobuild temporal-sql-tool go.temporal.io/server/cmd/tools/sql
gobuild ui-server github.com/temporalio/ui-server/v2/cmd/server
moddir() { go list -m -f '{{.Dir}}' "$1"; }
VGW_VERSION=$(go list -m -f '{{.Version}}' github.com/versity/versitygw)
modbuild github.com/versity/versitygw "$VGW_VERSION" ./cmd/versitygw "$CACHE/bin/versitygw-$VGW_VERSION" "-X=main.Version=$VGW_VERSION"
cp "$CACHE/bin/versitygw-$VGW_VERSION" "$CACHE/bin/versitygw"
TEMPORAL_DIR=$(moddir go.temporal.io/server)
UI_DIR=$(moddir github.com/temporalio/ui-server/v2)
VGW_DIR=$(moddir github.com/versity/versitygw)

# --- images ---------------------------------------------------------------
# Each build context is assembled under $CACHE/ctx; docker's layer cache
# makes an unchanged image a no-op.
ctx() { # name: a fresh, empty context directory
	rm -rf "$CACHE/ctx/$1"
	mkdir -p "$CACHE/ctx/$1"
	echo "$CACHE/ctx/$1"
}
mkdir -p "$CACHE/logs"
build() { # tag dockerfile context
	local log
	log=$CACHE/logs/build-$(basename "$3").log
	docker build -t "$1" -f "$2" "$3" >"$log" 2>&1 || {
		tail -30 "$log"
		fail "docker build $1 (log: $log)"
	}
}
step "building the images"
# The Alpine-like base: busybox and its applets, the C library the host
# built binaries link, CA certificates, tzdata, getent (musl-utils in
# Alpine), users root, nobody and temporal (1000).
c=$(ctx alpine-like)
r=$c/rootfs
mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc/ssl/certs,usr/share,tmp,root,home/ui-server}
chmod 1777 "$r/tmp"
cp /bin/busybox "$r/bin/busybox"
for a in $(/bin/busybox --list); do [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
cp /usr/bin/getent "$r/usr/bin/getent"
cp /bin/bash "$r/bin/bash" # the UI's start script is bash, and the UI image installs it
for b in "$CACHE"/bin/* /usr/bin/getent /bin/bash /usr/bin/prometheus /usr/bin/promtool; do
	ldd "$b" 2>/dev/null | awk '/=> \//{print $3} /^\t\/lib/{print $1}'
done | sort -u | while read -r lib; do
	mkdir -p "$r$(dirname "$lib")"
	cp -L "$lib" "$r$lib"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/ca-certificates.crt"
cp -r /usr/share/zoneinfo "$r/usr/share/zoneinfo"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\ntemporal:x:1000:1000::/home/temporal:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\ntemporal:x:1000:\n' >"$r/etc/group"
printf 'hosts: files dns\n' >"$r/etc/nsswitch.conf"
mkdir -p "$r/home/temporal" && chown 1000:1000 "$r/home/temporal" "$r/home/ui-server"
printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nCMD ["/bin/sh"]\n' >"$c/Dockerfile"
build octflow-test/alpine-like:1 "$c/Dockerfile" "$c"

c=$(ctx temporal-server)
cp "$CACHE/bin/temporal-server" "$c/"
cp "$TEMPORAL_DIR/docker/scripts/sh/entrypoint.sh" "$c/" && chmod 755 "$c/entrypoint.sh"
build octflow-test/temporal-server:1.32.1 "$HERE/images/temporal-server.Dockerfile" "$c"

c=$(ctx temporal-admin-tools)
cp "$CACHE/bin/temporal-sql-tool" "$c/"
cp -r "$TEMPORAL_DIR/schema" "$c/schema" && chmod -R u+w,a+rX "$c/schema"
build octflow-test/temporal-admin-tools:1.32.1 "$HERE/images/temporal-admin-tools.Dockerfile" "$c"

c=$(ctx temporal-ui)
cp "$CACHE/bin/ui-server" "$c/"
cp "$UI_DIR/config/docker.yaml" "$UI_DIR/docker/start-ui-server.sh" "$c/" && chmod 755 "$c/start-ui-server.sh" && chmod 644 "$c/docker.yaml"
build octflow-test/temporal-ui:2.54.1 "$HERE/images/temporal-ui.Dockerfile" "$c"

c=$(ctx versitygw)
cp "$CACHE/bin/versitygw" "$c/"
cp "$VGW_DIR/docker-entrypoint.sh" "$c/" && chmod 755 "$c/docker-entrypoint.sh"
build octflow-test/versitygw:v1.8.0 "$HERE/images/versitygw.Dockerfile" "$c"

c=$(ctx prometheus)
cp /usr/bin/prometheus /usr/bin/promtool "$c/"
cp "$ROOT/deploy/prometheus/prometheus.yml" "$c/"
build octflow-test/prometheus:debian "$HERE/images/prometheus.Dockerfile" "$c"

c=$(ctx postgres)
cp "$HERE/images/postgres-entrypoint.sh" "$c/docker-entrypoint.sh"
build octflow-test/postgres:15-bookworm "$HERE/images/postgres.Dockerfile" "$c"

# octflow: the shipped Dockerfile's last (runtime) stage, onto the local
# Debian base, with the host-built binary in place of the build stage's.
c=$(ctx octflow)
cp bin/octflow "$c/octflow"
awk '/^FROM /{n++} {lines[NR]=$0; stage[NR]=n} END{for(i=1;i<=NR;i++) if(stage[i]==n) print lines[i]}' Dockerfile |
	sed -e "1s|^FROM .*|FROM octflow-test/debian:$SUITE|" -e 's|^COPY --from=build /out/octflow |COPY octflow |' >"$c/Dockerfile"
grep -q -- '--from' "$c/Dockerfile" && fail "the Dockerfile's runtime stage copies from a stage other than the binary's: $(cat "$c/Dockerfile")"
build octflow-test/octflow:dev "$c/Dockerfile" "$c"
docker images --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' | grep '^octflow-test/' | sort | sed 's/^/    /'

# --- the project: the shipped file and deploy/, test secrets ---------------
# The shipped file reads deploy/octflow.env and deploy/secrets/, which hold
# a site's real secrets: the test runs a copy of the file and of deploy/
# in a directory of its own, with secrets made for the run.
RUN=$CACHE/run
rm -rf "$RUN"
mkdir -p "$RUN"
chmod 700 "$RUN"
cp docker-compose.yml "$RUN/"
cp "$HERE/compose.test.yml" "$RUN/"
tar -C "$ROOT" --exclude=deploy/octflow.env --exclude=deploy/secrets --exclude=deploy/compose-test -cf - deploy | tar -C "$RUN" -xf -
mkdir -p "$RUN/deploy/secrets"
rnd() { openssl rand -hex "$1"; }
pgpw=$(rnd 16) s3key=$(rnd 10) s3secret=$(rnd 20)
cat >"$RUN/deploy/octflow.env" <<EOF
POSTGRES_PASSWORD=$pgpw
POSTGRES_PWD=$pgpw
ROOT_ACCESS_KEY_ID=$s3key
ROOT_SECRET_ACCESS_KEY=$s3secret
OCTFLOW_S3_ACCESS_KEY=$s3key
OCTFLOW_S3_SECRET_KEY=$s3secret
GF_SECURITY_ADMIN_PASSWORD=$(rnd 16)
EOF
DEVICE=dev-device-$(rnd 16)
CLINICIAN=dev-clinician-$(rnd 16)
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
cat >"$RUN/deploy/secrets/tokens.json" <<EOF
[
  {"sha256": "$(sha "$DEVICE")", "name": "compose-test device", "role": "device", "deviceId": "compose-oct-1", "campus": "demo-campus"},
  {"sha256": "$(sha "$CLINICIAN")", "name": "compose-test clinician", "role": "clinician", "campus": "demo-campus"}
]
EOF
rnd 32 >"$RUN/deploy/secrets/pseudonym.key"
printf '{"active": "k1", "keys": {"k1": "%s"}}\n' "$(openssl rand -base64 32)" >"$RUN/deploy/secrets/codec-keys.json"
# Compose (without Swarm) bind-mounts secret files with their host mode;
# the octflow image runs as uid 10001.
chmod 644 "$RUN"/deploy/secrets/*

compose() { (cd "$RUN" && "$COMPOSE_BIN" -p "$PROJECT" -f docker-compose.yml -f compose.test.yml "$@"); }
logs_and_fail() {
	compose ps -a || true
	compose logs --no-color >"$CACHE/logs/stack.log" 2>&1 || true
	compose logs --no-color --tail 8 2>&1 | cut -c1-400 || true
	fail "$* (every service's log: $CACHE/logs/stack.log)"
}
cleanup() {
	if [ "${OCTFLOW_COMPOSE_KEEP:-0}" = 1 ]; then
		step "OCTFLOW_COMPOSE_KEEP=1: the stack stays up; take it down with: (cd $RUN && $COMPOSE_BIN -p $PROJECT -f docker-compose.yml -f compose.test.yml down -v)"
		return
	fi
	compose down -v --remove-orphans >/dev/null 2>&1 || true
}
trap cleanup EXIT
compose down -v --remove-orphans >/dev/null 2>&1 || true

# --- up -------------------------------------------------------------------
step "docker compose up --wait (gpuworker × 2)"
compose up -d --wait --wait-timeout 300 --scale gpuworker=2 >"$CACHE/logs/up.log" 2>&1 || {
	tail -20 "$CACHE/logs/up.log"
	logs_and_fail "the stack did not come up healthy"
}
compose ps --format 'table {{.Service}}\t{{.Status}}' | sed 's/^/    /'
API=http://$(compose port api 8080 | sed 's/^0\.0\.0\.0/127.0.0.1/')
case "$API" in http://127.0.0.1:*) ;; *) fail "the api is published at $API, not on 127.0.0.1" ;; esac
curl -fsS "$API/readyz" >/dev/null || logs_and_fail "the api at $API is not ready"
step "api on $API"

# --- exams ----------------------------------------------------------------
scans=$CACHE/scans
mkdir -p "$scans"
all=()
n=0
# submit N: N new exams, their IDs in $batch. The api lets a device upload
# two scans at once (OCTFLOW_UPLOADS_PER_DEVICE), so the uploads go one
# after the other; the exams then run together.
submit() {
	batch=()
	local i f out
	for i in $(seq "$1"); do
		n=$((n + 1))
		f=$scans/phantom-$n.dcm
		[ -s "$f" ] || bin/octflow phantom --out "$f" --seed "$((700 + n))" --frames 5 --rows 128 --cols 128 >/dev/null
		out=$(OCTFLOW_TOKEN=$DEVICE bin/octflow submit --api "$API" --file "$f" --exam-id "compose-$n-$(rnd 3)" 2>&1) ||
			logs_and_fail "submit $f: $out"
		batch+=("$(sed -n '/^{/,$p' <<<"$out" | jq -r .examId)")
	done
	all+=("${batch[@]}")
}
status() { curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$1"; }
# check ID...: each exam COMPLETED (waiting up to 5 minutes in all), its
# report there, its report stage run once.
check() {
	local id state runs deadline=$(($(date +%s) + 300))
	for id in "$@"; do
		while :; do
			state=$(status "$id" | jq -r .state) || state=unreachable
			case "$state" in COMPLETED | DEAD) break ;; esac
			[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "exam $id still $state after 5 minutes"
			sleep 2
		done
		[ "$state" = COMPLETED ] || logs_and_fail "exam $id ended $state: $(status "$id" | jq -c .lastFailure)"
		curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$id/report?format=json" -o "$scans/report.json" ||
			logs_and_fail "exam $id: no report"
		runs=$(curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$id/events" |
			jq '[.[] | select(.stage == "report" and .to == "EXECUTING")] | length')
		echo "    $id: $state, report $(wc -c <"$scans/report.json") bytes, report stage run $runs time(s)"
		[ "$runs" = 1 ] || logs_and_fail "exam $id: its report stage ran $runs times, want 1"
	done
}
# gpu_stage ID...: wait until one of the exams runs a stage on a GPU
# node; prints "exam stage node".
gpu_stage() {
	local id st deadline=$(($(date +%s) + 120))
	while [ "$(date +%s)" -lt "$deadline" ]; do
		for id in "$@"; do
			st=$(status "$id" | jq -r 'select(.state == "EXECUTING" and (.node // "" | startswith("gpu@"))) | "\(.examId) \(.stage) \(.node)"') || true
			[ -n "$st" ] && echo "$st" && return 0
		done
		sleep 0.5
	done
	logs_and_fail "no exam of $* reached a GPU stage within 2 minutes"
}

submit "$EXAMS"
step "submitted $EXAMS exams; waiting for each to finish"
check "${batch[@]}"
step "PASS: $EXAMS exams COMPLETED through the compose stack, one report each"

if [ "${OCTFLOW_COMPOSE_OUTAGES:-1}" = 1 ]; then
	# A GPU node's container killed (SIGKILL, no drain) in the middle of a stage.
	submit 4
	hit=$(gpu_stage "${batch[@]}") || exit 1
	read -r exam stage node <<<"$hit"
	step "killing GPU node $node (container ${node#gpu@}) while $exam runs $stage"
	docker kill "${node#gpu@}" >/dev/null || logs_and_fail "docker kill ${node#gpu@}"
	check "${batch[@]}"
	step "PASS: a GPU node killed mid-stage; every exam COMPLETED, one report each"
	compose up -d --wait --wait-timeout 180 --scale gpuworker=2 >>"$CACHE/logs/up.log" 2>&1 ||
		logs_and_fail "the GPU nodes did not come back"

	for service in temporal postgresql; do
		submit 4
		hit=$(gpu_stage "${batch[@]}") || exit 1
	read -r exam stage node <<<"$hit"
		step "restarting $service while $exam runs $stage on $node"
		compose restart "$service" >/dev/null 2>&1 || logs_and_fail "docker compose restart $service"
		check "${batch[@]}"
		step "PASS: $service restarted with exams in flight; every exam COMPLETED, one report each"
	done

	# down, then up with the volumes kept: every exam and report still there.
	step "docker compose down (volumes kept), then up --wait"
	compose down >/dev/null 2>&1 || logs_and_fail "docker compose down"
	compose up -d --wait --wait-timeout 300 --scale gpuworker=2 >>"$CACHE/logs/up.log" 2>&1 ||
		logs_and_fail "the stack did not come back up healthy"
	API=http://$(compose port api 8080)
	check "${all[@]}"
	step "PASS: after down and up, all ${#all[@]} exams COMPLETED with their reports"
fi
