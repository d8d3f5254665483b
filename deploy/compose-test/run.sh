#!/usr/bin/env bash
# make compose-test: set a clean directory up with deploy/init.sh and
# bring the shipped docker-compose.yml up on a real Docker Engine on this
# machine (and up again from a clean shell: nothing recreated); submit
# exams through the api's published port and see each COMPLETED with one
# report and its results filed over TLS in the demo campus's PACS; drill the alerts (the audit collector stopped, a GPU unhealthy,
# a certificate near expiry, the disk past 90%) to the test's receiver;
# check what Grafana's datasource and dashboards query; back it up with
# exams in flight, destroy every volume, restore it (deploy/backup.sh,
# deploy/restore.sh) and see every exam back or completed; then take the
# stack down.
#
# No image registry can be reached from these machines, so every image is
# built here (deploy/compose-test/images/): a Debian base by debootstrap
# from the Debian mirror apt's sources name, an Alpine-like base (busybox
# as /bin/sh and its applets, CA certificates, tzdata), Temporal's server,
# admin tools and UI and versitygw from their Go modules at the versions
# go.mod pins, PostgreSQL, Prometheus, Alertmanager, node-exporter and
# postgres-exporter from Debian, the octflow
# image from the shipped Dockerfile's runtime stage with the host-built
# bin/octflow, and the audit collector (rsyslog) and the TLS proxy
# (stunnel4) from their shipped Dockerfiles, and the test's PACS (Orthanc
# and its DICOMweb plugin, from Debian), all onto the debootstrapped
# Debian base. deploy/compose-test/compose.test.yml swaps those images in.
#
# It installs what it lacks (Debian: docker.io, debootstrap,
# busybox-static, prometheus, prometheus-alertmanager,
# prometheus-node-exporter, prometheus-postgres-exporter, jq, curl, openssl;
# Docker Compose v2 built
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
[ -x /bin/busybox ] && /bin/busybox --list | grep -x wget >/dev/null || missing+=(busybox-static) # not grep -q: its early exit fails the pipe
command -v prometheus >/dev/null || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null || missing+=(prometheus-alertmanager)
command -v prometheus-node-exporter >/dev/null || missing+=(prometheus-node-exporter)
command -v prometheus-postgres-exporter >/dev/null || missing+=(prometheus-postgres-exporter)
command -v jq >/dev/null || missing+=(jq)
command -v curl >/dev/null || missing+=(curl)
command -v ip >/dev/null || missing+=(iproute2)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
	step "installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Docker Engine ------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
	step "starting dockerd (log: $CACHE/dockerd.log)"
	# Without the script's other open files: dockerd outlives the test,
	# and a lock its caller holds (flock /tmp/heavy.lock make
	# compose-test) would stay held as long as dockerd runs.
	(
		for f in /proc/$BASHPID/fd/*; do
			[ "${f##*/}" -le 2 ] || eval "exec ${f##*/}>&-"
		done
		exec setsid dockerd --storage-driver=overlay2 >"$CACHE/dockerd.log" 2>&1 </dev/null
	) &
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
nice -n 10 make --no-print-directory build # stamped: version, commit (its Worker Deployment build ID)
# The stack's own Temporal server (cmd/octflow-temporal: the pinned
# server with octflow's authorization), as deploy/temporal/Dockerfile
# builds it.
gobuild temporal-server ./cmd/octflow-temporal
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
for b in "$CACHE"/bin/* /usr/bin/getent /bin/bash /usr/bin/prometheus /usr/bin/promtool /usr/bin/prometheus-alertmanager /usr/bin/amtool \
	/usr/bin/prometheus-node-exporter /usr/bin/prometheus-postgres-exporter; do
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

c=$(ctx alertmanager)
cp /usr/bin/prometheus-alertmanager "$c/alertmanager"
cp /usr/bin/amtool "$c/"
# Debian's build reads its notification templates from files, not from
# the binary as upstream's does.
cp -r /usr/share/prometheus/alertmanager "$c/share"
# The official image's default: every alert to one receiver that sends
# nowhere (the stack runs its own configuration).
printf 'route:\n  receiver: default\nreceivers:\n  - name: default\n' >"$c/alertmanager.yml"
build octflow-test/alertmanager:debian "$HERE/images/alertmanager.Dockerfile" "$c"

c=$(ctx node-exporter)
cp /usr/bin/prometheus-node-exporter "$c/node_exporter"
build octflow-test/node-exporter:debian "$HERE/images/node-exporter.Dockerfile" "$c"

c=$(ctx postgres-exporter)
cp /usr/bin/prometheus-postgres-exporter "$c/postgres_exporter"
build octflow-test/postgres-exporter:debian "$HERE/images/postgres-exporter.Dockerfile" "$c"

c=$(ctx alert-sink)
cp "$HERE/images/alert-sink-hook.sh" "$c/"
build octflow-test/alert-sink:1 "$HERE/images/alert-sink.Dockerfile" "$c"

c=$(ctx postgres)
cp "$HERE/images/postgres-entrypoint.sh" "$c/docker-entrypoint.sh"
build octflow-test/postgres:15-bookworm "$HERE/images/postgres.Dockerfile" "$c"

# runtime_image TAG DOCKERFILE BINARY: an octflow image as the
# Dockerfile's last (runtime) stage makes it, onto the local Debian base,
# with the host-built BINARY in place of the build stage's.
runtime_image() {
	local c
	c=$(ctx "octflow-$(tr -c 'a-z0-9.\n' - <<<"${1##*:}")")
	cp "$3" "$c/octflow"
	awk '/^FROM /{n++} {lines[NR]=$0; stage[NR]=n} END{for(i=1;i<=NR;i++) if(stage[i]==n) print lines[i]}' "$2" |
		sed -e "1s|^FROM .*|FROM octflow-test/debian:$SUITE|" -e 's|^COPY --from=build /out/octflow |COPY octflow |' >"$c/Dockerfile"
	grep -q -- '--from' "$c/Dockerfile" && fail "$2's runtime stage copies from a stage other than the binary's: $(cat "$c/Dockerfile")"
	build "$1" "$c/Dockerfile" "$c"
}
# octflow: the shipped Dockerfile's, with bin/octflow.
runtime_image octflow-test/octflow:dev Dockerfile bin/octflow
# octflow's Temporal server: deploy/temporal/Dockerfile's runtime stage
# onto the local Debian base, with the host-built server.
c=$(ctx octflow-temporal)
cp "$CACHE/bin/temporal-server" "$c/temporal-server"
mkdir -p "$c/deploy/temporal" && cp deploy/temporal/entrypoint.sh "$c/deploy/temporal/"
awk '/^FROM /{n++} {lines[NR]=$0; stage[NR]=n} END{for(i=1;i<=NR;i++) if(stage[i]==n) print lines[i]}' deploy/temporal/Dockerfile |
	sed -e "1s|^FROM .*|FROM octflow-test/debian:$SUITE|" -e 's|^COPY --from=build /out/temporal-server |COPY temporal-server |' >"$c/Dockerfile"
grep -q -- '--from' "$c/Dockerfile" && fail "deploy/temporal/Dockerfile's runtime stage copies from a stage other than the server's: $(cat "$c/Dockerfile")"
build octflow-test/octflow-temporal:dev "$c/Dockerfile" "$c"
# The audit collector and the TLS proxy: their shipped Dockerfiles, onto
# the local Debian base (their packages from the Debian mirror its apt
# sources name, as debootstrap left them).
for d in audit tls-proxy; do
	c=$(ctx "$d")
	cp -r "deploy/$d/." "$c/"
	sed -i "s|^FROM .*|FROM octflow-test/debian:$SUITE|" "$c/Dockerfile"
	build "octflow-test/$d:dev" "$c/Dockerfile" "$c"
done
# The demo campus's PACS (compose.test.yml, pacs-orthanc): Debian's
# Orthanc and its DICOMweb plugin onto the local Debian base.
c=$(ctx orthanc)
cp "$HERE/images/orthanc.json" "$c/"
build octflow-test/orthanc:debian "$HERE/images/orthanc.Dockerfile" "$c"
docker images --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' | grep '^octflow-test/' | sort | sed 's/^/    /'
printf '    Debian stand-ins: %s; %s; %s; %s\n' "$(prometheus --version 2>&1 | sed -n 1p)" "$(prometheus-alertmanager --version 2>&1 | sed -n 1p)" \
	"$(prometheus-node-exporter --version 2>&1 | sed -n 1p)" "$(prometheus-postgres-exporter --version 2>&1 | sed -n 1p)"

# --- the project: the shipped file and deploy/, bootstrapped by init.sh ----
# The shipped file reads deploy/secrets/ and .env, which hold a site's
# real secrets and settings: the test runs a copy of the file and of
# deploy/ in a clean directory of its own, and sets it up as an operator
# does, with deploy/init.sh.
RUN=$CACHE/run
rm -rf "$RUN"
mkdir -p "$RUN"
chmod 700 "$RUN"
cp docker-compose.yml "$RUN/"
cp "$HERE/compose.test.yml" "$HERE/compose.gpu.test.yml" "$HERE/compose.node.test.yml" "$RUN/"
# A third GPU node, as docs/operations.md says to add one.
cp deploy/compose.gpu.example.yml "$RUN/docker-compose.override.yml"
tar -C "$ROOT" --exclude=deploy/octflow.env --exclude=deploy/secrets --exclude=deploy/compose-test -cf - deploy | tar -C "$RUN" -xf -
rnd() { openssl rand -hex "$1"; }
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
# The api's and the UI's ports: free ones, picked here, since the UI names
# the codec endpoint by the api's public URL and the api answers the UI's
# origin. Temporal's frontend and the S3 proxy, opened by the shipped
# file's settings on the Docker bridge's address: what host-gateway
# reaches from the node's network (and no other host).
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p" && return; }
	done
}
OCTFLOW_TEST_API_PORT=$(free_port)
OCTFLOW_TEST_UI_PORT=$(free_port)
[ "$OCTFLOW_TEST_UI_PORT" != "$OCTFLOW_TEST_API_PORT" ] || OCTFLOW_TEST_UI_PORT=$(free_port)
# A daemon's first start (no docker0 yet, an empty network store) leaves
# the Gateway out of the bridge's IPAM record (moby/moby#26799): the
# address the bridge's interface holds is the same one, so read that then.
bridge_address() {
	local gw dev
	gw=$(docker network inspect bridge -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}')
	if [ -z "$gw" ]; then
		dev=$(docker network inspect bridge -f '{{index .Options "com.docker.network.bridge.name"}}')
		gw=$(ip -4 -o addr show dev "${dev:-docker0}" 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
	fi
	echo "$gw"
}
PUBLIC_BIND=$(bridge_address)
[ -n "$PUBLIC_BIND" ] || fail "the Docker bridge has no IPv4 address (neither in its IPAM record nor on its interface)"

# The bootstrap, the one command of docs/operations.md (Production), on
# the clean directory: the public URL (the api's port picked above; its
# host, localhost, names the api's certificate) and the three receivers,
# here the test's webhook receiver (alert-sink) by receiver name. It
# makes the secrets and certificates, the Alertmanager configuration,
# the first admin token (printed once) and .env.
T_INIT=$(date +%s)
hook=http://alert-sink:8080/cgi-bin/hook
ADMIN=$(cd "$RUN" && deploy/init.sh --public-url "https://localhost:$OCTFLOW_TEST_API_PORT" --oncall-url "$hook?receiver=oncall" \
	--ticket-url "$hook?receiver=tickets" --heartbeat-url "$hook?receiver=heartbeat" 2>"$CACHE/logs/init.log") || {
	cat "$CACHE/logs/init.log"
	fail "deploy/init.sh"
}
ADMIN=$(grep '^octflow-admin-' <<<"$ADMIN") || fail "deploy/init.sh printed no admin token"
for f in .env deploy/secrets/alertmanager.yml deploy/secrets/tokens.json deploy/secrets/api.pem deploy/secrets/codec-keys.json; do
	[ -s "$RUN/$f" ] || fail "deploy/init.sh did not write $f"
done
grep -q "$(sha "$ADMIN")" "$RUN/deploy/secrets/tokens.json" && ! grep -q "$ADMIN" "$RUN/deploy/secrets/tokens.json" ||
	fail "tokens.json does not keep the admin token's hash alone"
amtool check-config "$RUN/deploy/secrets/alertmanager.yml" >/dev/null || fail "amtool check-config rejects the Alertmanager configuration init.sh wrote"
# The api's callers, as docs/operations.md says to add them (octflow
# admin token mint, which prints each secret once): a device and a
# clinician of the demo campus, beside init.sh's admin. The file keeps
# the mode init.sh gave it, which the api's user reads by.
tokens=$RUN/deploy/secrets/tokens.json
DEVICE=$("$ROOT/bin/octflow" admin token mint --file "$tokens" --name "compose-test device" --role device \
	--device-id compose-oct-1 --campus demo-campus --urgent 2>>"$CACHE/logs/init.log") || fail "octflow admin token mint (a device): $(tail -1 "$CACHE/logs/init.log")"
CLINICIAN=$("$ROOT/bin/octflow" admin token mint --file "$tokens" --name "compose-test clinician" --role clinician \
	--campus demo-campus 2>>"$CACHE/logs/init.log") || fail "octflow admin token mint (a clinician): $(tail -1 "$CACHE/logs/init.log")"
grep -q "$(sha "$DEVICE")" "$tokens" && grep -q "$(sha "$CLINICIAN")" "$tokens" && grep -q "$(sha "$ADMIN")" "$tokens" &&
	! grep -q -e "$DEVICE" -e "$CLINICIAN" "$tokens" || fail "tokens.json does not keep the three callers' hashes alone: $(cat "$tokens")"
[ "$(stat -c %a "$tokens")" = 444 ] || fail "octflow admin token mint changed tokens.json's mode to $(stat -c %a "$tokens")"
# What the test sets beyond init.sh's answers, in the same .env, so that
# every later `docker compose` in the directory, from any shell, reads
# it: Temporal's frontend and the S3 proxy opened on one address (the
# Docker bridge's, what host-gateway reaches from the remote node's
# network) instead of loopback; the UI's origin; the test's ports and
# stage time; and its Compose files and project, as init.sh names
# docker-compose.gpu.yml on a GPU host. Nothing of it is exported to
# the test's own Compose runs: they read .env too.
sed -i -e "s|^OCTFLOW_TEMPORAL_BIND=.*|OCTFLOW_TEMPORAL_BIND='$PUBLIC_BIND'|" -e "s|^OCTFLOW_S3_BIND=.*|OCTFLOW_S3_BIND='$PUBLIC_BIND'|" "$RUN/.env"
OCTFLOW_PUBLIC_URL=https://localhost:$OCTFLOW_TEST_API_PORT
OCTFLOW_UI_ORIGIN=http://127.0.0.1:$OCTFLOW_TEST_UI_PORT
cat >>"$RUN/.env" <<EOF
# The compose test's own (deploy/compose-test/run.sh).
OCTFLOW_UI_ORIGIN='$OCTFLOW_UI_ORIGIN'
OCTFLOW_TEST_API_PORT='$OCTFLOW_TEST_API_PORT'
OCTFLOW_TEST_UI_PORT='$OCTFLOW_TEST_UI_PORT'
OCTFLOW_TEST_STAGE_TIME='${OCTFLOW_TEST_STAGE_TIME:-2s}'
COMPOSE_FILE='docker-compose.yml:compose.test.yml'
COMPOSE_PROJECT_NAME='$PROJECT'
EOF
grep -qx "OCTFLOW_PUBLIC_URL='$OCTFLOW_PUBLIC_URL'" "$RUN/.env" && grep -qx "OCTFLOW_TEMPORAL_BIND='$PUBLIC_BIND'" "$RUN/.env" ||
	fail ".env does not hold the public URL and the binds: $(cat "$RUN/.env")"
step "PASS: deploy/init.sh set the clean directory up in $(($(date +%s) - T_INIT)) s: .env, secrets, certificates, receivers, an admin token"
# The CA's key leaves the stack's secrets, as docs/security.md says: GPU
# nodes are enrolled by signing requests, signed where the key is kept.
CA_OFFLINE=$CACHE/ca-offline
rm -rf "$CA_OFFLINE" && mkdir -p "$CA_OFFLINE" && chmod 700 "$CA_OFFLINE"
mv "$RUN/deploy/secrets/ca-key.pem" "$CA_OFFLINE/"
cp "$RUN/deploy/secrets/ca.pem" "$CA_OFFLINE/"
# A GPU node on another host, by the commands a site runs: its bundle and
# S3 account on the stack's host, its key and request on the node's host
# (here the bundle's directory), the request signed with the offline CA.
enrol() {
	local node=$1 campus=${2:-}
	OCTFLOW_NODE_CAMPUS=$campus OCTFLOW_BIN=$ROOT/bin/octflow "$ROOT/deploy/make-node.sh" "$node" "$RUN/deploy/secrets" >/dev/null ||
		fail "deploy/make-node.sh $node"
	[ ! -e "$RUN/deploy/secrets/nodes/$node/node.pem" ] || fail "make-node.sh signed $node's certificate without the CA key on the stack's host"
	"$ROOT/deploy/node-request.sh" "$node" "$RUN/deploy/secrets/nodes/$node" >/dev/null || fail "deploy/node-request.sh $node"
	OCTFLOW_NODE_CAMPUS=$campus "$ROOT/deploy/sign-node.sh" "$node" "$RUN/deploy/secrets/nodes/$node/node.csr" "$CA_OFFLINE" >/dev/null ||
		fail "deploy/sign-node.sh $node"
	rm -f "$RUN/deploy/secrets/nodes/$node/node.csr"
}
NODE_ID=gpu-remote-1
NODE_B=$RUN/deploy/secrets/nodes/$NODE_ID
enrol "$NODE_ID"
# A node bound to one campus: its certificate names the campus, its
# payload keys are that campus's only.
enrol gpu-north-1 north
jq -e '(.keys == null) and (.scoped | keys == ["campus/north", "system"])' "$RUN/deploy/secrets/nodes/gpu-north-1/codec-keys.json" >/dev/null ||
	fail "the bundle of a node bound to campus north holds more than north's and the fleet's keys: $(jq -c '{keys: (.keys // {} | keys), scoped: (.scoped // {} | keys)}' "$RUN/deploy/secrets/nodes/gpu-north-1/codec-keys.json")"
# A node enrolled and then revoked, by the commands a site runs: its
# certificate still passes TLS, and Temporal gives it no role.
enrol gpu-revoked-1
"$ROOT/deploy/revoke-node.sh" gpu-revoked-1 "$RUN/deploy/secrets" >/dev/null || fail "deploy/revoke-node.sh"

# The demo campus's PACS, and octflow's export to it. The hospital's side
# (pacs-site/, as the PACS's own administrators keep it): its TLS
# front's certificate (name pacs), signed here with the stack's CA (the
# offline copy), and Orthanc's registered user for the campus. octflow's
# side, as an operator sets it up (docs/operations.md, Export to a
# PACS, per campus): deploy/secrets/pacs.json names the campus's DICOMweb base URL,
# the CA its certificate is checked against and the credential files,
# each a file of its own that compose.test.yml mounts into the worker
# (the PACS file into the api too), the credentials readable by
# octflow's user (10001) only.
PACS_SITE=$RUN/pacs-site
mkdir -p "$PACS_SITE" && chmod 700 "$PACS_SITE"
cp "$HERE/pacs-tls.conf" "$RUN/"
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:pacs\n' >"$PACS_SITE/pacs.ext"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=pacs" -keyout "$PACS_SITE/pacs-key.pem" 2>/dev/null |
	openssl x509 -req -CA "$CA_OFFLINE/ca.pem" -CAkey "$CA_OFFLINE/ca-key.pem" -set_serial "0x$(rnd 8)" -days 90 \
		-extfile "$PACS_SITE/pacs.ext" -out "$PACS_SITE/pacs.pem" 2>/dev/null || fail "sign the PACS's certificate"
PACS_USER=octflow-demo-campus
PACS_PASSWORD=$(rnd 16)
printf '{"RegisteredUsers": {"%s": "%s"}}\n' "$PACS_USER" "$PACS_PASSWORD" >"$PACS_SITE/credentials.json"
chown 10002 "$PACS_SITE/credentials.json" && chmod 400 "$PACS_SITE/credentials.json" # Orthanc's user
chown 10001 "$PACS_SITE/pacs-key.pem" && chmod 400 "$PACS_SITE/pacs-key.pem"           # stunnel's
chmod 444 "$PACS_SITE/pacs.pem"
(
	cd "$RUN/deploy/secrets"
	cp "$CA_OFFLINE/ca.pem" pacs-demo-campus-ca.pem # the PACS's CA: here the stack's
	printf '%s\n' "$PACS_USER" >pacs-demo-campus-user
	printf '%s\n' "$PACS_PASSWORD" >pacs-demo-campus-password
	chown 10001 pacs-demo-campus-user pacs-demo-campus-password && chmod 400 pacs-demo-campus-user pacs-demo-campus-password
	cat >pacs.json <<'EOF'
{"demo-campus": {"url": "https://pacs:8443/dicom-web",
                 "caFile": "/run/secrets/pacs-demo-campus-ca.pem",
                 "usernameFile": "/run/secrets/pacs-demo-campus-user",
                 "passwordFile": "/run/secrets/pacs-demo-campus-password"}}
EOF
	chmod 444 pacs-demo-campus-ca.pem pacs.json
) || fail "writing the PACS file and its secrets"

export CURL_CA_BUNDLE=$RUN/deploy/secrets/ca.pem OCTFLOW_API_CA_FILE=$RUN/deploy/secrets/ca.pem

compose() { (cd "$RUN" && "$COMPOSE_BIN" -p "$PROJECT" -f docker-compose.yml -f compose.test.yml "$@"); }
# node: the GPU node on another host (deploy/compose.remote-node.yml), a
# Compose project and network of its own, reaching the stack only at
# the ports it publishes on $PUBLIC_BIND (set once the stack is up).
node() {
	(cd "$RUN" && OCTFLOW_NODE_ID=$NODE_ID OCTFLOW_NODE_BUNDLE=$NODE_B OCTFLOW_STACK_HOST=octflow-stack \
		OCTFLOW_TEMPORAL_PORT=${TEMPORAL_PUB##*:} OCTFLOW_S3_PORT=${S3_PUB##*:} \
		"$COMPOSE_BIN" -p "$PROJECT-node" -f deploy/compose.remote-node.yml -f compose.node.test.yml "$@")
}
TEMPORAL_PUB=:7233 S3_PUB=:7443
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
	node down -v --remove-orphans >/dev/null 2>&1 || true
	# --profile upgrade: the upgrade drill's worker-next, which a plain
	# down leaves running (and holding the network).
	compose --profile upgrade down -v --remove-orphans >/dev/null 2>&1 || true
}
trap cleanup EXIT
compose --profile upgrade down -v --remove-orphans >/dev/null 2>&1 || true

# --- up -------------------------------------------------------------------
step "docker compose up --wait"
compose up -d --wait --wait-timeout 300 >"$CACHE/logs/up.log" 2>&1 || {
	tail -20 "$CACHE/logs/up.log"
	logs_and_fail "the stack did not come up healthy"
}
compose ps --format 'table {{.Service}}\t{{.Status}}' | sed 's/^/    /'
API=https://$(compose port api 8080 | sed 's/^0\.0\.0\.0/127.0.0.1/')
case "$API" in https://127.0.0.1:*) ;; *) fail "the api is published at $API, not on 127.0.0.1" ;; esac
curl -fsS "$API/readyz" >/dev/null || logs_and_fail "the api at $API is not ready"
PROM=http://$(compose port prometheus 9090)
SINK=http://$(compose port alert-sink 8080)
step "api on $API, Prometheus on $PROM, the test's webhook receiver on $SINK"

# A second `up`, as another admin, cron or a reboot would run it: from a
# shell with nothing of the test's exported, in the stack's directory,
# with no option. Compose takes every setting from .env, finds every
# service as it is and recreates none (the same containers, the same
# configuration as the test's own runs see).
T_SECOND=$(date +%s)
clean_compose() { (cd "$RUN" && env -i PATH="$PATH" HOME="$HOME" "$COMPOSE_BIN" "$@"); }
before=$(compose ps -a -q | sort)
compose config >"$CACHE/logs/config-test.yml" 2>&1 || logs_and_fail "docker compose config"
clean_compose config >"$CACHE/logs/config-clean.yml" 2>&1 || logs_and_fail "docker compose config from a clean shell: $(tail -3 "$CACHE/logs/config-clean.yml")"
diff "$CACHE/logs/config-test.yml" "$CACHE/logs/config-clean.yml" >/dev/null ||
	logs_and_fail "the configuration from a clean shell differs: $(diff "$CACHE/logs/config-test.yml" "$CACHE/logs/config-clean.yml" | head -20)"
clean_compose up -d --wait --wait-timeout 300 >"$CACHE/logs/up-clean.log" 2>&1 || {
	tail -20 "$CACHE/logs/up-clean.log"
	logs_and_fail "a second up from a clean shell did not come up healthy"
}
! grep -E 'Recreate|Creat' "$CACHE/logs/up-clean.log" | grep -v -E 'Network|Volume' || logs_and_fail "a second up from a clean shell recreated services (above)"
[ "$(compose ps -a -q | sort)" = "$before" ] || logs_and_fail "a second up from a clean shell left other containers: before $before, after $(compose ps -a -q | sort)"
jq -e --arg u "$OCTFLOW_PUBLIC_URL" '.services.api.environment.OCTFLOW_PUBLIC_URL == $u' <(clean_compose config --format json) >/dev/null ||
	logs_and_fail "the api's public URL from a clean shell is not $OCTFLOW_PUBLIC_URL"
code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$API/v1/nodes")
[ "$code" = 200 ] || logs_and_fail "the admin token init.sh printed: GET /v1/nodes answered $code"
step "PASS: a second up from a clean shell (env -i) read .env, recreated nothing ($(wc -l <<<"$before") containers as they were) in $(($(date +%s) - T_SECOND)) s; init.sh's admin token is the api's"

# What the host reaches: the api over HTTPS only, without /metrics; the
# UI, Prometheus and Alertmanager on loopback (and the test's receiver);
# Temporal's frontend and the S3 proxy where OCTFLOW_TEMPORAL_BIND and
# OCTFLOW_S3_BIND opened them, both refusing a client without a
# certificate of the stack's CA; nothing else of the stack (PostgreSQL,
# S3 itself, Temporal's HTTP API, the metrics listeners) is published.
plain=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://${API#https://}/readyz" || true)
[ "$plain" != 200 ] || logs_and_fail "the api answers plain HTTP"
code=$(curl -sS -m 5 -o /dev/null -w '%{http_code}' "$API/metrics")
[ "$code" = 404 ] || logs_and_fail "GET /metrics on the api's public port answered $code, want 404"
published=$(for c in $(compose ps -q); do
	docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}{{range $p, $b := .NetworkSettings.Ports}}{{range $b}} {{$p}}@{{.HostIp}}{{end}}{{end}}' "$c"
done | awk 'NF > 1' | sort)
echo "$published" | sed 's/^/    published: /'
echo "$published" | awk -v pub="$PUBLIC_BIND" '{
	for (i = 2; i <= NF; i++) {
		if ($i ~ /@127\.0\.0\.1$/) continue
		if (($1 == "temporal" || $1 == "s3-proxy") && substr($i, index($i, "@") + 1) == pub) continue
		exit 1
	}
}' || logs_and_fail "a port is published beyond 127.0.0.1 (and the bridge address for Temporal and the S3 proxy)"
[ "$(echo "$published" | awk '{print $1}' | tr '\n' ' ')" = "alert-sink alertmanager api prometheus s3-proxy temporal temporal-ui " ] ||
	logs_and_fail "published services: $(echo "$published" | awk '{print $1}' | tr '\n' ' '), want alert-sink alertmanager api prometheus s3-proxy temporal temporal-ui"
TEMPORAL_PUB=$(compose port temporal 7233)
S3_PUB=$(compose port s3-proxy 7443)
# tls_probe NAME HOST:PORT [curl args]: an HTTPS request to the published
# port, checking its certificate for NAME; prints the HTTP status.
tls_probe() {
	local name=$1 hp=$2
	shift 2
	curl -sS -m 10 -o /dev/null -w '%{http_code}' --cacert "$RUN/deploy/secrets/ca.pem" \
		--resolve "$name:${hp##*:}:${hp%:*}" "$@" "https://$name:${hp##*:}/"
}
for target in "temporal $TEMPORAL_PUB" "s3-proxy $S3_PUB"; do
	read -r name hp <<<"$target"
	if out=$(tls_probe "$name" "$hp" 2>&1); then
		logs_and_fail "$name at $hp answered a client without a certificate: $out"
	fi
	echo "    $name at $hp without a client certificate: $(tail -1 <<<"$out" | cut -c1-160)"
	out=$(tls_probe "$name" "$hp" --cert "$NODE_B/node.pem" --key "$NODE_B/node-key.pem" 2>&1) ||
		logs_and_fail "$name at $hp refused the node's certificate: $out"
	echo "    $name at $hp with $NODE_ID's certificate: HTTP $out"
done
step "PASS: from the host, the api answers HTTPS only and no /metrics; Temporal and the S3 proxy only to a client certificate; PostgreSQL, S3 itself and the metrics listeners are not published"
# No secret in any container's environment: every one is a file, mounted
# where it is used.
for c in $(compose ps -q); do
	svc=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$c")
	leaked=$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$c" |
		grep -E '^[A-Z0-9_]*(PASSWORD|PWD|SECRET|ACCESS_KEY)[A-Z0-9_]*=' | grep -v -E '^[A-Z0-9_]*_FILE=' | cut -d= -f1 | sort | tr '\n' ' ' || true)
	[ -z "$leaked" ] || logs_and_fail "$svc has secrets in its environment: $leaked"
done
step "PASS: no secret in any service's environment"
# Temporal's frontend takes no client without a certificate of the
# stack's CA: the namespace job's container, run again without its
# client certificate, is refused (TLS 1.3 refuses after the handshake,
# so the client sees "certificate required" or a connection cut), while
# the same container with its certificate is served. The UI, with its
# own, lists the namespaces through it.
if out=$(compose run --rm --no-deps -T -e OCTFLOW_TEMPORAL_CERT_FILE= -e OCTFLOW_TEMPORAL_KEY_FILE= \
	-e OCTFLOW_SETUP_WAIT=5s temporal-namespace 2>&1); then
	logs_and_fail "Temporal's frontend took a client without a certificate: $(tail -3 <<<"$out")"
fi
echo "    without a client certificate: $(tail -1 <<<"$out" | cut -c1-200)"
out=$(compose run --rm --no-deps -T -e OCTFLOW_SETUP_WAIT=30s temporal-namespace 2>&1) ||
	logs_and_fail "the namespace job, with its client certificate, failed: $(tail -3 <<<"$out" | cut -c1-400)"
UI=http://$(compose port temporal-ui 8080)
curl -fsS -m 20 "$UI/api/v1/namespaces" | jq -e '.namespaces[] | select(.namespaceInfo.name == "octflow")' >/dev/null ||
	logs_and_fail "the Web UI does not list the octflow namespace through Temporal's mTLS"
step "PASS: Temporal's frontend refuses a client without a certificate; the UI reaches it with its own"
# Temporal on PostgreSQL as its own role, not the superuser; the server's
# connection limit above what the pools may open.
pg() { compose exec -T postgresql psql -U postgres -d postgres -tAc "$1"; }
[ "$(pg "SELECT rolsuper FROM pg_roles WHERE rolname = 'temporal'")" = f ] ||
	logs_and_fail "Temporal's role is missing or a superuser"
[ "$(pg "SELECT count(*) FROM pg_stat_activity WHERE usename = 'temporal'")" -gt 0 ] ||
	logs_and_fail "Temporal holds no connection as its role temporal"
step "PASS: Temporal connects as its own role, no superuser; max_connections $(pg 'SHOW max_connections'), $(pg "SELECT count(*) FROM pg_stat_activity WHERE usename = 'temporal'") in use"
# PostgreSQL takes TLS only (docker-compose.yml, postgresql: ssl=on,
# deploy/postgres/pg_hba.conf): every connection over the network is
# encrypted, Temporal's and postgres-exporter's among them (its clients
# check the server's certificate, verify-full, or fail to connect at
# all); one without TLS is refused from the database network itself
# (the server's own container, to its service name), where the same
# connection with TLS and the superuser's password is taken.
compose exec -T postgres-exporter wget -q --no-check-certificate -O /dev/null https://127.0.0.1:9187/metrics || logs_and_fail "postgres-exporter's metrics"
pg_tcp() { pg "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.client_addr IS NOT NULL AND $1"; }
[ "$(pg_tcp 'NOT s.ssl')" = 0 ] ||
	logs_and_fail "PostgreSQL holds connections without TLS: $(pg "SELECT string_agg(a.usename || '@' || host(a.client_addr), ' ') FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.client_addr IS NOT NULL AND NOT s.ssl")"
for role in temporal postgres_exporter; do
	[ "$(pg_tcp "s.ssl AND a.usename = '$role'")" -gt 0 ] || logs_and_fail "$role holds no connection over TLS"
done
if refused=$(compose exec -T postgresql psql -w "host=postgresql dbname=postgres user=postgres sslmode=disable connect_timeout=5" -tAc 'SELECT 1' 2>&1); then
	logs_and_fail "PostgreSQL took a connection without TLS: $refused"
fi
grep -q 'no encryption' <<<"$refused" || logs_and_fail "a connection without TLS failed, but not for want of TLS: $refused"
tls=$(compose exec -T postgresql sh -c 'PGPASSWORD=$(cat /run/secrets/postgres-password) psql -w "host=postgresql dbname=postgres user=postgres sslmode=require connect_timeout=5" -tAc "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"' 2>&1) ||
	logs_and_fail "the same connection with TLS was refused: $tls"
[ "$tls" = t ] || logs_and_fail "the same connection with TLS: ssl $tls, want t"
step "PASS: PostgreSQL takes TLS only: $(pg_tcp true) connections over the network, each TLS (temporal $(pg_tcp "a.usename = 'temporal'"), postgres_exporter $(pg_tcp "a.usename = 'postgres_exporter'")); one without TLS refused from the database network ($(grep -o 'rejects connection.*' <<<"$refused" | cut -c1-160))"
# A cluster made before postgres-exporter's role (initdb ran without it):
# the role dropped, the exporter reads pg_up 0; an operator's `up`
# (postgres-roles, on every up) makes it again, and pg_up reads 1.
exporter_up() { compose exec -T postgres-exporter wget -q --no-check-certificate -O - https://127.0.0.1:9187/metrics | awk '$1 == "pg_up" { print $2 }'; }
pg 'ALTER ROLE postgres_exporter NOLOGIN' >/dev/null || logs_and_fail "postgres_exporter: NOLOGIN"
pg "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'postgres_exporter'" >/dev/null
pg 'DROP ROLE postgres_exporter' >/dev/null || logs_and_fail "drop postgres_exporter"
[ "$(exporter_up)" = 0 ] || logs_and_fail "postgres-exporter reads pg_up $(exporter_up) without its role, want 0"
compose up -d --wait --wait-timeout 120 >"$CACHE/logs/up-roles.log" 2>&1 || {
	tail -20 "$CACHE/logs/up-roles.log"
	logs_and_fail "up, to make the exporter's role again"
}
[ "$(pg "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member JOIN pg_roles g ON g.oid = m.roleid WHERE r.rolname = 'postgres_exporter' AND g.rolname = 'pg_monitor' AND NOT r.rolsuper")" = 1 ] ||
	logs_and_fail "postgres-roles did not make postgres_exporter in pg_monitor: $(compose logs --no-color postgres-roles | tail -5)"
[ "$(exporter_up)" = 1 ] || logs_and_fail "postgres-exporter reads pg_up $(exporter_up) after postgres-roles, want 1"
step "PASS: a cluster without postgres-exporter's role gets it from an up (postgres-roles): pg_up 0 without it, 1 after"
# The stack's own Temporal server decides each call by the role the client
# certificate names (cmd/octflow-temporal): a GPU node's certificate may
# neither start nor terminate a workflow, nor list them; the api's may not
# terminate; the UI's may not start; the operator's may list.
OCTFLOW_COMPOSE_TEMPORAL=$TEMPORAL_PUB OCTFLOW_COMPOSE_SECRETS=$RUN/deploy/secrets OCTFLOW_COMPOSE_NODE=$NODE_ID OCTFLOW_COMPOSE_REVOKED_NODE=gpu-revoked-1 \
	OCTFLOW_COMPOSE_CAMPUS_NODE=gpu-north-1 OCTFLOW_COMPOSE_NODE_CAMPUS=north \
	go test -count=1 -run '^TestTheStacksTemporalDecidesByRole$' -v ./deploy/compose-test >"$CACHE/logs/authz.log" 2>&1 || {
	tail -30 "$CACHE/logs/authz.log"
	logs_and_fail "Temporal's authorization by role"
}
grep -q -- '--- PASS: TestTheStacksTemporalDecidesByRole' "$CACHE/logs/authz.log" ||
	logs_and_fail "the authorization probe did not run: $(tail -5 "$CACHE/logs/authz.log")"
step "PASS: Temporal decides by role: a GPU node's certificate may not start, terminate or list workflows, the api's may not terminate, the UI's may not start, a revoked node's may call nothing; a node enrolled by request with the CA key off the stack's host, bound to campus north, polls north's queue and its own only, and no other node polls north's"
# The authorizer runs in the frontend: history, matching and the worker
# service listen on the server's loopback only, out of every other
# container's reach (curl's exit 7: could not connect).
for port in 7234 7235 7239; do
	code=0
	compose exec -T api curl -s -m 5 -o /dev/null "http://temporal:$port/" || code=$?
	[ "$code" = 7 ] || logs_and_fail "Temporal's internal port $port answered another container (curl exit $code, want 7: refused)"
done
step "PASS: Temporal's history, matching and worker services are out of the other containers' reach"

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
			st=$(status "$id" | jq -r 'select(.state == "EXECUTING" and (.node // "" | test("^gpu-[0-9]+$"))) | "\(.examId) \(.stage) \(.node)"') || true
			[ -n "$st" ] && echo "$st" && return 0
		done
		sleep 0.5
	done
	logs_and_fail "no exam of $* reached a GPU stage within 2 minutes"
}

# promql QUERY: the result vector of an instant query, as JSON.
promql() { curl -fsS -m 10 --data-urlencode "query=$1" "$PROM/api/v1/query" | jq -c .data.result; }
# received: what the webhook receiver was sent, one JSON document a line.
received() { curl -fsS -m 10 "$SINK/cgi-bin/hook"; }
# alert_received: OctflowUrgentSLABreach, firing, at the on-call receiver
# (and what else the receiver got: the watchdog at its own); the worker's
# counter one series, at 1 or more. Before any down: the receiver keeps
# what it was sent only while its container lives.
alert_received() {
	deadline=$((T_URGENT + 240))
	while ! received | jq -e -s 'map(select(.status == "firing") | .alerts[] | select(.labels.alertname == "OctflowUrgentSLABreach")) | length > 0' >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "no OctflowUrgentSLABreach reached the webhook receiver within 4 minutes of the breach; it got: $(received | cut -c1-300); ALERTS: $(promql ALERTS)"
		sleep 5
	done
	received | jq -r -s 'map(.alerts[] | "\(.labels.alertname) \(.status)") | unique | .[]' | sed 's/^/    received: /'
	received | jq -e -s 'map(select(.receiver == "oncall") | .alerts[] | select(.labels.alertname == "OctflowUrgentSLABreach")) | length > 0' >/dev/null ||
		logs_and_fail "OctflowUrgentSLABreach did not come through the oncall receiver"
	series=$(promql 'octflow_urgent_sla_breaches_total{job="octflow-worker"}')
	[ "$(jq length <<<"$series")" = 1 ] && [ "$(jq -r '.[0].value[1]' <<<"$series")" -ge 1 ] ||
		logs_and_fail "the worker's breach counter is not one series at ≥ 1: $series"
	step "PASS: the urgent exam's SLA breach reached the webhook receiver through Alertmanager ($(($(date +%s) - T_URGENT)) s after submission)"
	check "$urgent"
}

submit "$EXAMS"
step "submitted $EXAMS exams; waiting for each to finish"
check "${batch[@]}"
step "PASS: $EXAMS exams COMPLETED through the compose stack, one report each"

# --- the export to the demo campus's PACS, over TLS ------------------------
# Each exam's results filed in the phantom's own study on the campus's
# PACS (octflow phantom names it 2.25.<1000000 + seed>.1, its patient
# PHANTOM-<seed>; submit's seed is 700 + n, n counting the exams
# submitted, and the api answers with exam IDs of its own), through the
# PACS's TLS front with the CA and credentials the PACS file names: the
# exam's status says delivered; QIDO-RS lists the study's instances, as
# many as the export counted: the Encapsulated PDF, the Macular Grid SR
# and a Segmentation where octflow makes one, and nothing else; WADO-RS
# serves the PDF's metadata, filed under the phantom's Patient ID. (A
# DICOMweb client with the worker's files: curl in the worker's
# container.)
T_PACS=$(date +%s)
pacs_get() { # PATH: a DICOMweb GET to the PACS, with the PACS file's CA and credentials
	compose exec -T worker sh -c 'curl -fsS -m 10 --cacert /run/secrets/pacs-demo-campus-ca.pem \
		-u "$(cat /run/secrets/pacs-demo-campus-user):$(cat /run/secrets/pacs-demo-campus-password)" \
		-H "Accept: application/dicom+json" "https://pacs:8443/dicom-web$1"' sh "$1"
}
PDF_CLASS=1.2.840.10008.5.1.4.1.1.104.1 SR_CLASS=1.2.840.10008.5.1.4.1.1.79.1 SEG_CLASS=1.2.840.10008.5.1.4.1.1.66.4
for i in "${!batch[@]}"; do
	id=${batch[$i]}
	deadline=$(($(date +%s) + 120))
	until exp=$(status "$id" | jq -c '.export // {}') && [ "$(jq -r .status <<<"$exp")" = delivered ]; do
		[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "exam $id's export to the PACS, after 2 minutes: $exp; want delivered"
		sleep 2
	done
	seed=$((700 + n - ${#batch[@]} + 1 + i))
	study=2.25.$((1000000 + seed)).1
	inst=$(pacs_get "/studies/$study/instances") || logs_and_fail "QIDO-RS of exam $id's study $study on the PACS"
	jq -e --argjson n "$(jq .instances <<<"$exp")" --arg pdf "$PDF_CLASS" --arg sr "$SR_CLASS" --arg seg "$SEG_CLASS" \
		'map(.["00080016"].Value[0]) | length == $n and any(.[]; . == $pdf) and any(.[]; . == $sr) and all(.[]; . == $pdf or . == $sr or . == $seg)' \
		<<<"$inst" >/dev/null ||
		logs_and_fail "exam $id's study $study on the PACS holds $(jq -c 'map(.["00080016"].Value[0])' <<<"$inst"); want the PDF, the SR and a SEG where made, $(jq .instances <<<"$exp") in all"
	pdf=$(jq -r --arg pdf "$PDF_CLASS" 'map(select(.["00080016"].Value[0] == $pdf))[0] | "\(.["0020000E"].Value[0])/instances/\(.["00080018"].Value[0])"' <<<"$inst")
	meta=$(pacs_get "/studies/$study/series/${pdf%%/*}/instances/${pdf##*/}/metadata") || logs_and_fail "WADO-RS of exam $id's PDF on the PACS"
	jq -e --arg p "PHANTOM-$seed" '.[0] | .["00420012"].Value[0] == "application/pdf" and .["00100020"].Value[0] == $p' <<<"$meta" >/dev/null ||
		logs_and_fail "exam $id's PDF on the PACS: $(jq -c '.[0] | {mime: .["00420012"], patient: .["00100020"]}' <<<"$meta"), want application/pdf under PHANTOM-$seed"
	echo "    $id: export delivered, $(jq .instances <<<"$exp") instances in $(jq .tries <<<"$exp") send(s); on the PACS, study $study: $(jq -r 'map(.["00080060"].Value[0]) | sort | join(" ")' <<<"$inst")"
done
# Only over TLS with the campus's CA and credentials: Orthanc's own port
# is out of the stack's reach (on the PACS's network; curl's exit 6, 7
# or 28: no such host, refused, timed out), the front serves no plain
# HTTP, the system's CAs do not
# trust it (curl's exit 60), and without credentials it answers 401.
code=0
compose exec -T worker curl -s -m 5 -o /dev/null http://pacs-orthanc:8042/ || code=$?
case "$code" in 6 | 7 | 28) ;; *) logs_and_fail "Orthanc's plain port from the worker: curl exit $code, want 6, 7 or 28 (out of reach)" ;; esac
code=$(compose exec -T worker curl -s -m 5 -o /dev/null -w '%{http_code}' http://pacs:8443/dicom-web/studies) || true
[ "$code" = 000 ] || logs_and_fail "the PACS's front answered plain HTTP: $code"
code=0
compose exec -T worker curl -s -m 5 -o /dev/null https://pacs:8443/dicom-web/studies || code=$?
[ "$code" = 60 ] || logs_and_fail "the PACS's front with the system's CAs only: curl exit $code, want 60 (not trusted)"
code=$(compose exec -T worker curl -s -m 5 -o /dev/null -w '%{http_code}' --cacert /run/secrets/pacs-demo-campus-ca.pem https://pacs:8443/dicom-web/studies) || true
[ "$code" = 401 ] || logs_and_fail "the PACS without credentials answered $code, want 401"
# octflow refuses a plain-HTTP PACS: a worker given a PACS file naming
# Orthanc's own port stops at start, saying why. (A PACS whose CA the
# campus does not name: cmd/octflow/e2e's
# TestResultsGoToACampussPACSOverTLSWithItsCredentials.)
printf '{"demo-campus": {"url": "http://pacs-orthanc:8042/dicom-web", "usernameFile": "/run/secrets/pacs-demo-campus-user", "passwordFile": "/run/secrets/pacs-demo-campus-password"}}\n' >"$scans/pacs-plain.json"
chmod 444 "$scans/pacs-plain.json"
if out=$(compose run --rm --no-deps -T -v "$scans/pacs-plain.json:/etc/octflow/pacs-plain.json:ro" \
	-e OCTFLOW_PACS_FILE=/etc/octflow/pacs-plain.json worker 2>&1); then
	logs_and_fail "a worker with a plain-HTTP PACS URL started: $(tail -3 <<<"$out")"
fi
grep -q 'is plain http' <<<"$out" || logs_and_fail "a worker with a plain-HTTP PACS URL did not say why it stopped: $(tail -3 <<<"$out" | cut -c1-400)"
echo "    a worker with a plain-HTTP PACS URL: $(grep -o 'is plain http: [^;]*' <<<"$out" | sed -n 1p)"
step "PASS: the ${#batch[@]} exams' results reached the demo campus's PACS over TLS, with its CA and credentials (status delivered; QIDO-RS and WADO-RS: PDF and SR in each patient's study); the PACS is reached only so; a plain-HTTP PACS is refused ($(($(date +%s) - T_PACS)) s)"

# --- a campus's DICOM router: a device's C-STORE to octflow, over TLS ------
# deploy/orthanc's recipe as a campus runs it (its README): the router
# (compose.test.yml, router: Debian's Orthanc, DICOMweb plugin and DCMTK)
# reads the site's orthanc.json (router-site/orthanc.json: its AE title,
# and the device's AE title at the device's fixed address, the AE
# allow-list) beside the recipe's octflow.json and octflow-forward.lua as
# shipped; its router token, minted as docs/operations.md says (the api
# restarted to read it), from a secret file; octflow's DICOMweb root at
# https://api:8080 (a name of every api certificate) checked against the
# stack's CA. The device (compose.test.yml, device: storescu at that
# address) sends a phantom by C-STORE: octflow keeps it as the exam whose
# reference it derives from the SOP Instance UID (api/stow.go: the
# device exam ID "sop:<UID>" keyed with the campus and the api's
# pseudonym key, as cmd/octflow/e2e's h.ref derives it), which only the
# router's token reads as its own and which COMPLETES with one report;
# once octflow stored it the router holds no copy (Orthanc's REST API,
# on its loopback only: from inside its container). An AE title the
# router does not declare, and the device's own from another address of
# the campus, store nothing. The same router trusting another CA
# forwards nothing: Orthanc refuses octflow's certificate (libcurl's
# error 60), keeps the instance, and octflow has no such exam. The
# router is the campus's, not the stack's: removed after, with its
# network.
T_ROUTER=$(date +%s)
campus() { compose --profile campus-router "$@"; }
ROUTER_SITE=$RUN/router-site
OTHER_ROUTER=$PROJECT-router-other-ca
CAMPUS_NET=${PROJECT}_campus
router_gone() {
	docker rm -f "$OTHER_ROUTER" >/dev/null 2>&1 || true
	campus rm -sf router >/dev/null 2>&1 || true
	docker network rm "$CAMPUS_NET" >/dev/null 2>&1 || true
}
trap 'router_gone; cleanup' EXIT
router_fail() { # MESSAGE: the routers' logs (not in the stack's), then logs_and_fail
	campus logs --no-color --tail 30 router 2>&1 | cut -c1-400 || true
	docker logs --tail 30 "$OTHER_ROUTER" 2>&1 | cut -c1-400 || true
	logs_and_fail "$*"
}
router_get() { campus exec -T router curl -fsS -m 10 "http://127.0.0.1:8042$1"; } # Orthanc's REST API
# exam_ref UID: the exam octflow keeps an instance sent by STOW-RS as
# (intake.Pseudonymizer.Exam: "ex-" and 24 hex digits of the HMAC-SHA256
# of "exam", the campus and "sop:<UID>", each NUL-ended).
exam_ref() {
	printf 'exam\0demo-campus\0sop:%s\0' "$1" |
		openssl dgst -sha256 -mac HMAC -macopt "key:$(tr -d '[:space:]' <"$RUN/deploy/secrets/pseudonym.key")" | awk '{ print "ex-" substr($NF, 1, 24) }'
}
# phantom: a new phantom (counted in n, as submit's), its file in $f and
# its SOP Instance UID in $sop (octflow phantom: 2.25.<1000000 + seed>.3).
phantom() {
	n=$((n + 1))
	f=$scans/phantom-$n.dcm
	[ -s "$f" ] || bin/octflow phantom --out "$f" --seed "$((700 + n))" --frames 5 --rows 128 --cols 128 >/dev/null
	sop=2.25.$((1000000 + 700 + n)).3
}
# device AET FILE [ROUTER]: storescu from the device's address, as AET.
device() { campus run --rm --no-deps -T -v "$2:/scan.dcm:ro" device storescu -aet "$1" -aec "$ROUTER_AET" "${3:-router}" 4242 /scan.dcm; }
router_gone
mkdir -p "$ROUTER_SITE" && chmod 700 "$ROUTER_SITE"
cp "$HERE/router-site/orthanc.json" "$ROUTER_SITE/orthanc.json" && chmod 444 "$ROUTER_SITE/orthanc.json"
ROUTER_AET=$(jq -r .DicomAet "$ROUTER_SITE/orthanc.json")
DEVICE_AET=$(jq -r '[.DicomModalities[]][0][0]' "$ROUTER_SITE/orthanc.json")
ROUTER=$("$ROOT/bin/octflow" admin token mint --file "$tokens" --name "compose-test router" --role router \
	--device-id compose-router-1 --campus demo-campus 2>"$CACHE/logs/router-mint.log") ||
	logs_and_fail "octflow admin token mint (a router): $(tail -1 "$CACHE/logs/router-mint.log")"
printf '%s\n' "$ROUTER" >"$ROUTER_SITE/router-token"
chown 10002 "$ROUTER_SITE/router-token" && chmod 400 "$ROUTER_SITE/router-token" # Orthanc's user
compose restart api >/dev/null 2>&1 || logs_and_fail "docker compose restart api, to read the router's token"
campus up -d --wait --wait-timeout 60 router >"$CACHE/logs/router-up.log" 2>&1 ||
	router_fail "the router did not come up: $(tail -3 "$CACHE/logs/router-up.log")"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=not the stack's CA" \
	-keyout /dev/null -out "$scans/other-ca.pem" 2>/dev/null && chmod 444 "$scans/other-ca.pem" || fail "make another CA"
campus run -d --no-deps --name "$OTHER_ROUTER" -v "$scans/other-ca.pem:/etc/octflow-other-ca.pem:ro" \
	-e OCTFLOW_CA_FILE=/etc/octflow-other-ca.pem router >/dev/null 2>"$CACHE/logs/router-other-ca.log" ||
	router_fail "the router trusting another CA did not start: $(tail -3 "$CACHE/logs/router-other-ca.log")"
deadline=$(($(date +%s) + 60))
until curl -fsS -m 5 "$API/readyz" >/dev/null 2>&1; do
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "the api was not ready within 60 s of its restart"
	sleep 1
done

phantom
out=$(device "$DEVICE_AET" "$f" 2>&1) || router_fail "storescu from the device, as $DEVICE_AET, to the router: $out"
routed=$(exam_ref "$sop")
deadline=$(($(date +%s) + 60))
until held=$(router_get /instances) && [ "$(jq length <<<"$held")" = 0 ]; do
	[ "$(date +%s)" -lt "$deadline" ] || router_fail "the router still holds $held 60 s after the device's C-STORE; want it forwarded, stored and deleted"
	sleep 1
done
logs=$(campus logs --no-color router 2>&1) || true
grep 'stored by octflow (job .*); deleted from this router' <<<"$logs" >/dev/null ||
	router_fail "the router holds nothing, and its log does not say octflow stored the instance"
grep -F 'HTTPS will use the CA certificates from this file: /run/secrets/ca.pem' <<<"$logs" >/dev/null && ! grep 'Error code 60 in libcurl' <<<"$logs" >/dev/null ||
	router_fail "the router's log does not say it checks octflow's certificate with the stack's CA, or says it refused it"
by_router=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ROUTER" "$API/v1/exams/$routed") || true
by_device=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $DEVICE" "$API/v1/exams/$routed") || true
by_clinician=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$routed") || true
[ "$by_clinician $by_router $by_device" = "200 403 404" ] ||
	router_fail "exam $routed (SOP Instance UID $sop): the clinician's token reads it $by_clinician, the router's $by_router, the device's $by_device; want 200, 403 (a router only stores) and 404 (a device reads only its own)"
echo "    the device's C-STORE ($DEVICE_AET to $ROUTER_AET): exam $routed, the router's; the router's copy deleted"

# The allow-list: an AE title not declared, from the device's address;
# the device's AE title from another address on the campus network.
if out=$(device INTRUDER "$f" 2>&1); then
	router_fail "the router took a C-STORE from INTRUDER, an AE title it does not declare: $out"
fi
if out=$(docker run --rm --network "$CAMPUS_NET" -v "$f:/scan.dcm:ro" octflow-test/orthanc:debian \
	storescu -aet "$DEVICE_AET" -aec "$ROUTER_AET" router 4242 /scan.dcm 2>&1); then
	router_fail "the router took $DEVICE_AET's C-STORE from an address other than the device's: $out"
fi
held=$(router_get /instances) || router_fail "the router's REST API, from inside its container"
[ "$(jq length <<<"$held")" = 0 ] || router_fail "the router holds $held after C-STOREs its allow-list refuses"
logs=$(campus logs --no-color router 2>&1) || true
grep -F "Its IP address should be $(jq -r '[.DicomModalities[]][0][1]' "$ROUTER_SITE/orthanc.json")" <<<"$logs" >/dev/null ||
	router_fail "the router's log does not say it refused $DEVICE_AET for its address"
echo "    refused: INTRUDER from the device's address; $DEVICE_AET from another address of the campus"

# Another CA: octflow's certificate refused, nothing forwarded.
phantom
deadline=$(($(date +%s) + 60))
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$OTHER_ROUTER" 2>&1)" = healthy ]; do
	[ "$(date +%s)" -lt "$deadline" ] || router_fail "the router trusting another CA not healthy within 60 s"
	sleep 1
done
out=$(device "$DEVICE_AET" "$f" "$OTHER_ROUTER" 2>&1) || router_fail "storescu from the device to the router trusting another CA: $out"
deadline=$(($(date +%s) + 30))
until logs=$(docker logs "$OTHER_ROUTER" 2>&1) && grep 'not stored by octflow (job .*, try 1 of' <<<"$logs" >/dev/null; do
	[ "$(date +%s)" -lt "$deadline" ] || router_fail "the router trusting another CA did not say, within 30 s, that its forward failed"
	sleep 1
done
grep -F 'HTTPS will use the CA certificates from this file: /etc/octflow-other-ca.pem' <<<"$logs" >/dev/null &&
	grep 'Error code 60 in libcurl' <<<"$logs" >/dev/null || router_fail "the router trusting another CA failed, but not on octflow's certificate"
held=$(docker exec "$OTHER_ROUTER" curl -fsS -m 10 http://127.0.0.1:8042/instances) && [ "$(jq length <<<"$held")" = 1 ] ||
	router_fail "the router trusting another CA holds $held; want the instance it could not forward kept"
code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$(exam_ref "$sop")") || true
[ "$code" = 404 ] || router_fail "the scan sent to the router trusting another CA: exam $(exam_ref "$sop") answered $code, want 404"
echo "    the router trusting another CA: $(grep -o 'Error code 60 in libcurl: .*' <<<"$logs" | sed -n 1p); the instance kept, no exam"

check "$routed"
all+=("$routed")
router_gone
trap cleanup EXIT
step "PASS: a campus's router (deploy/orthanc as shipped, its site's orthanc.json, a router token from a secret file) took the device's C-STORE and forwarded it over HTTPS checked with the stack's CA: exam $routed COMPLETED with one report, the router's copy deleted; an undeclared AE title and the device's from another address stored nothing; trusting another CA, it forwarded nothing ($(($(date +%s) - T_ROUTER)) s)"

# --- the certificates are watched, and do not all expire on one day -------
# Prometheus has each role's own certificates and the Temporal frontend's
# as its clients saw it (octflow_certificate_expiry_timestamp_seconds),
# and, by file, every other certificate deploy/make-certs.sh made (the
# api's OCTFLOW_CERTIFICATE_FILES): the CA, S3's, the S3 proxy's, the
# audit collector's, the api's audit certificate, the Web UI's and the
# namespace job's; each expiring on a day of its own (deploy/make-certs.sh
# staggers them).
certs=$(promql 'min by (use, subject) (octflow_certificate_expiry_timestamp_seconds)')
for want in 'api-server ' 'temporal-client octflow-api' 'temporal-client octflow-worker' 'temporal-client octflow-gpu' 'temporal-server temporal' \
	'ca.pem octflow stack CA' 's3.pem s3' 's3-proxy.pem s3-proxy' 'audit.pem audit' 'audit-client.pem octflow-api-audit' \
	'temporal-ui.pem temporal-ui' 'temporal-operator.pem octflow-operator' 'postgresql.pem postgresql'; do
	jq -e --arg w "$want" 'map("\(.metric.use) \(.metric.subject)") | any(startswith($w))' <<<"$certs" >/dev/null ||
		logs_and_fail "no certificate expiry for '$want' in Prometheus: $certs"
done
# The stack's own (deploy/make-certs.sh), not the nodes enrolled later.
stack=$(jq -c 'map(select(.metric.subject | test("^(octflow-(api|worker|gpu|operator|api-audit)|temporal|temporal-ui|s3|s3-proxy|audit|postgresql|octflow stack CA)$")))' <<<"$certs")
days=$(jq -r 'map(.value[1] | tonumber / 86400 | floor) | unique | length' <<<"$stack")
[ "$days" = "$(jq length <<<"$stack")" ] || logs_and_fail "the stack's certificates expire on the same day: $stack"
step "PASS: $(jq length <<<"$certs") certificates watched; the stack's $(jq length <<<"$stack") expire each on a day of its own"

# --- hardened by default, as Docker runs them ------------------------------
for svc in api worker gpu-0 gpu-1; do
	hc=$(docker inspect "$(compose ps -q "$svc")" | jq -c '.[0].HostConfig | {CapDrop, SecurityOpt, Memory, PidsLimit, LogConfig}')
	jq -e '(.CapDrop // [] | index("ALL")) != null and (.SecurityOpt // [] | index("no-new-privileges:true")) != null
		and .Memory > 0 and .PidsLimit > 0 and .LogConfig.Type == "json-file" and (.LogConfig.Config["max-size"] // "") != ""' <<<"$hc" >/dev/null ||
		logs_and_fail "$svc is not run hardened: $hc"
done
step "PASS: api, worker, gpu-0 and gpu-1 run with every capability dropped, no new privileges, bounded memory and processes, rotated logs"
# Every container of the stack on a read-only root (aside: the test's
# own receiver, and the demo campus's PACS, which stands for the
# hospital's, not the stack's), and each writes where its volumes and
# tmpfs are.
rw=$(for c in $(compose ps -a -q); do
	docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.HostConfig.ReadonlyRootfs}}' "$c"
done | awk '$1 !~ /^(alert-sink|pacs|pacs-orthanc)$/ && $2 != "true" { print $1 }' | sort | tr '\n' ' ')
[ -z "$rw" ] || logs_and_fail "containers with a writable root file system: $rw"
compose exec -T api sh -ec 'touch /var/spool/octflow-uploads/.w /tmp/.w && rm /var/spool/octflow-uploads/.w /tmp/.w && ! touch /var/lib/octflow/.w 2>/dev/null' ||
	logs_and_fail "the api does not write its spool and /tmp only"
ls=$(compose exec -T gpu-0 ls /var/lib/octflow/takes) || logs_and_fail "gpu-0's take notes volume"
[ "$(echo $ls)" = "gpu-0 gpu-1" ] || logs_and_fail "the gpu-takes volume holds '$(echo $ls)', want gpu-0 gpu-1"
step "PASS: every container of the stack runs on a read-only root ($(compose ps -a -q | wc -l) checked); the api writes its spools, the GPU nodes their take notes, each in a directory of its own"
# Networks split by role (docker-compose.yml, networks): from a GPU node,
# PostgreSQL, the audit collector and alert-sink (on default, like the
# world outside) neither resolve nor connect, S3 does; from the api,
# PostgreSQL neither resolves nor connects, Temporal does (curl's exit 6:
# could not resolve, 7: refused, 28: timed out; any other, connected).
for probe in "gpu-0 postgresql:5432 no" "gpu-0 audit:2514 no" "gpu-0 alert-sink:8080 no" "gpu-0 s3:7070 yes" \
	"api postgresql:5432 no" "api temporal:7233 yes"; do
	read -r svc hp want <<<"$probe"
	resolves=yes
	compose exec -T "$svc" timeout 8 getent hosts "${hp%:*}" >/dev/null 2>&1 || resolves=no
	code=0
	compose exec -T "$svc" curl -s -m 5 -o /dev/null "http://$hp/" || code=$?
	case "$code" in 6 | 7 | 28) connects=no ;; *) connects=yes ;; esac
	[ "$resolves $connects" = "$want $want" ] ||
		logs_and_fail "from $svc, $hp resolves: $resolves, connects: $connects (curl exit $code); want $want"
done
# Docker gives a container on an internal network a gateway too, but
# drops what leaves its subnet: out of the host's reach. Temporal's port
# published on the Docker bridge's address ($TEMPORAL_PUB, where the
# remote GPU node connects) is a host address outside every stack
# network: the api (on default) connects to it, gpu-0 and PostgreSQL do
# not.
for want in "gpu-0 no" "postgresql no" "api yes"; do
	read -r svc out <<<"$want"
	code=0
	compose exec -T "$svc" timeout 5 bash -c "exec 3<>/dev/tcp/${TEMPORAL_PUB%:*}/${TEMPORAL_PUB##*:}" 2>/dev/null || code=$?
	got=no
	[ "$code" != 0 ] || got=yes
	[ "$got" = "$out" ] || logs_and_fail "from $svc, the host's $TEMPORAL_PUB connects: $got (exit $code); want $out"
done
step "PASS: networks split by role: gpu-0 reaches S3, not PostgreSQL, the audit collector or the default network; the api Temporal, not PostgreSQL; gpu-0 and PostgreSQL reach nothing outside the stack's networks, the api the host"

# --- the Web UI decodes payloads through the api's codec -------------------
# As a browser on the UI does: the UI's settings name the codec endpoint
# (with credentials); the UI's API gives an exam's history, its payloads
# sealed; the codec, called from the UI's origin with the session cookie
# of /codec/login (a clinician's), opens them. Without the cookie, or
# from another origin, nothing is opened.
settings=$(curl -fsS -m 10 "$UI/api/v1/settings") || logs_and_fail "the UI's settings"
CODEC=$(jq -r .Codec.Endpoint <<<"$settings")
[ "$CODEC" = "$OCTFLOW_PUBLIC_URL/codec" ] && [ "$(jq -r .Codec.IncludeCredentials <<<"$settings")" = true ] ||
	logs_and_fail "the UI's codec settings: $(jq -c .Codec <<<"$settings"), want $OCTFLOW_PUBLIC_URL/codec with credentials"
wf=$(jq -rn --arg s "exam/demo-campus/${batch[0]}" '$s | @uri')
curl -fsS -m 20 "$UI/api/v1/namespaces/octflow/workflows/$wf/history" -o "$scans/history.json" ||
	logs_and_fail "the UI's history of exam ${batch[0]}"
jq -c '{payloads: [.history.events[0].workflowExecutionStartedEventAttributes.input.payloads[0]]}' "$scans/history.json" >"$scans/payloads.json"
sealed=$(jq -r '.payloads[0].data' "$scans/payloads.json" | base64 -d | tr -c '[:print:]' '.')
! grep -q -- "${batch[0]}" <<<"$sealed" || logs_and_fail "the exam's input is in clear in Temporal's history"
jar=$scans/codec.cookies
rm -f "$jar"
code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -c "$jar" --data-urlencode "token=$CLINICIAN" "$CODEC/login")
grep -q octflow_codec_session "$jar" || logs_and_fail "POST $CODEC/login answered $code and set no session cookie"
codec_decode() { # [curl args]: POST the payloads to the codec as the UI's page; prints the status
	curl -sS -m 10 -o "$scans/decoded.json" -D "$scans/decoded.headers" -w '%{http_code}' -H "Content-Type: application/json" \
		-H "X-Namespace: octflow" --data-binary @"$scans/payloads.json" "$@" "$CODEC/decode"
}
pre=$(curl -sS -m 10 -o /dev/null -D - -X OPTIONS -H "Origin: $OCTFLOW_UI_ORIGIN" -H "Access-Control-Request-Method: POST" \
	-H "Access-Control-Request-Headers: content-type,x-namespace" "$CODEC/decode" | tr -d '\r')
grep -qi "^access-control-allow-origin: $OCTFLOW_UI_ORIGIN$" <<<"$pre" && grep -qi '^access-control-allow-credentials: true$' <<<"$pre" ||
	logs_and_fail "the codec's CORS preflight does not admit the UI's origin with credentials: $pre"
code=$(codec_decode -H "Origin: $OCTFLOW_UI_ORIGIN" -H "Sec-Fetch-Site: cross-site")
[ "$code" = 401 ] || logs_and_fail "the codec, without the UI's session cookie, answered $code, want 401"
code=$(codec_decode -b "$jar" -H "Origin: https://elsewhere.example" -H "Sec-Fetch-Site: cross-site")
[ "$code" = 403 ] || logs_and_fail "the codec, called with the cookie from a page of another origin, answered $code, want 403"
code=$(codec_decode -b "$jar" -H "Origin: $OCTFLOW_UI_ORIGIN" -H "Sec-Fetch-Site: cross-site")
[ "$code" = 200 ] || logs_and_fail "the codec, called from the UI's origin with its cookie, answered $code: $(cut -c1-300 "$scans/decoded.json")"
grep -qi "^access-control-allow-origin: $OCTFLOW_UI_ORIGIN" "$scans/decoded.headers" ||
	logs_and_fail "the codec's answer does not let the UI's page read it: $(cat "$scans/decoded.headers")"
opened=$(jq -r '.payloads[0].data' "$scans/decoded.json" | base64 -d)
grep -q -- "${batch[0]}" <<<"$opened" || logs_and_fail "the decoded input does not name exam ${batch[0]}: $(cut -c1-300 <<<"$opened")"
echo "    decoded: $(jq -r '.payloads[0].metadata.encoding' "$scans/decoded.json" | base64 -d), $(wc -c <<<"$opened") bytes naming ${batch[0]}"
step "PASS: the UI's codec endpoint ($CODEC) opens a real exam's payloads for the UI's origin with its session; not without it, not for another origin"

# --- the audit trail in the stack's collector --------------------------------
# The api's audit messages (the clinician's report reads and codec use
# above) reach the rsyslog collector over TLS, in its file.
# (The file into a variable first: grep -q's early exit would fail a
# pipe under pipefail.)
deadline=$(($(date +%s) + 60))
while :; do
	trail=$(compose exec -T audit cat /var/log/audit/audit.log 2>/dev/null || true)
	grep 'IHE+RFC-3881' <<<"$trail" | grep 'compose-test clinician' >/dev/null && break
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "no audit message of the clinician in the collector's file within 60 s: $(tail -c 600 <<<"$trail")"
	sleep 3
done
lines=$(grep -c 'IHE+RFC-3881' <<<"$trail")
step "PASS: the audit trail reaches the collector over TLS: $lines audit messages in its file, the clinician's among them"
# The collector's peer check, live: an entry sent with a GPU node's
# certificate of the same CA is never answered for, nor kept; one sent
# with the api's audit certificate is. (The collector is on the audit
# network alone, internal, out of the host's reach: the test, built here,
# runs in a container on that network, with the secrets.)
nice -n 10 go test -c -o "$CACHE/bin/composetest.test" ./deploy/compose-test || fail "go test -c ./deploy/compose-test"
docker run --rm --network "${PROJECT}_audit" -v "$CACHE/bin/composetest.test:/composetest.test:ro" -v "$RUN/deploy/secrets:/secrets:ro" \
	-e OCTFLOW_COMPOSE_AUDIT=audit:2514 -e OCTFLOW_COMPOSE_SECRETS=/secrets -e OCTFLOW_COMPOSE_NODE="$NODE_ID" octflow-test/debian:$SUITE \
	/composetest.test -test.count=1 -test.run '^TestTheStacksCollectorTakesOnlyTheApisAuditCertificate$' -test.v >"$CACHE/logs/collector.log" 2>&1 || {
	tail -30 "$CACHE/logs/collector.log"
	logs_and_fail "the collector's peer check"
}
grep -q -- '--- PASS: TestTheStacksCollectorTakesOnlyTheApisAuditCertificate' "$CACHE/logs/collector.log" ||
	logs_and_fail "the collector probe did not run: $(tail -5 "$CACHE/logs/collector.log")"
trail=$(compose exec -T audit cat /var/log/audit/audit.log 2>/dev/null || true)
grep -q 'sent-with-the-api-certificate' <<<"$trail" || logs_and_fail "the entry sent with the api's audit certificate is not in the collector's file"
! grep -q "forged-by-$NODE_ID" <<<"$trail" || logs_and_fail "the collector kept an entry sent with a GPU node's certificate"
step "PASS: the stack's collector keeps an entry sent with the api's audit certificate and refuses one sent with a GPU node's certificate of the same CA"

# --- alert drills ----------------------------------------------------------
# What stops intake or loses data, made to happen, and each alert followed
# to the test's receiver, as docs/operations.md (Alerts: drills) has an
# operator do it: the audit collector stopped, a GPU made unhealthy, a
# certificate near expiry, the disk under the volumes past 90% full; all
# four at once. The rules are the shipped ones but for their waits, for
# the drills only: Prometheus scrapes and evaluates every 5 s instead of
# 15, the drilled rules' `for:` is 10 s instead of 2 or 5 minutes, and
# the collector's silence counts from 20 s instead of 300 (a diff checks
# that nothing else changed; OctflowCertificateExpiring has no `for:`
# and is as shipped). Alertmanager is as shipped (30 s group_wait).
T_DRILLS=$(date +%s)
PROMDIR=$RUN/deploy/prometheus
SECRETS=$RUN/deploy/secrets
cp "$PROMDIR/prometheus.yml" "$CACHE/prometheus.yml.orig"
cp "$PROMDIR/rules/octflow.yml" "$CACHE/octflow-rules.yml.orig"
drilled='OctflowAuditCollectorNotTaking|OctflowGPUUnhealthy|OctflowCertificateExpiring|OctflowDiskFilling|OctflowPostgresDown'
# rule_for NAME: the `for:` Prometheus now holds for rule NAME, in seconds.
rule_for() { curl -fsS -m 10 "$PROM/api/v1/rules" | jq -r --arg n "$1" '[.data.groups[].rules[] | select(.name == $n) | .duration] | .[0]'; }
# prometheus_reload GPU_FOR: SIGHUP, then until OctflowGPUUnhealthy's
# `for:` is GPU_FOR seconds and every target was scraped since. (A reload
# with new intervals starts each target's scrapes afresh, and a target
# that goes before its first new scrape, as a restarted worker's old
# address does, leaves its series unmarked for five minutes.)
prometheus_reload() {
	local deadline=$(($(date +%s) + 60)) hup
	promtool check config "$PROMDIR/prometheus.yml" >/dev/null || fail "promtool check config refuses $PROMDIR/prometheus.yml"
	hup=$(date +%s)
	compose kill -s SIGHUP prometheus >/dev/null 2>&1 || logs_and_fail "docker compose kill -s SIGHUP prometheus"
	until [ "$(rule_for OctflowGPUUnhealthy)" = "$1" ] && [ "$(promql "min(timestamp(up)) > $hup" | jq length)" = 1 ]; do
		[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "Prometheus did not reload (OctflowGPUUnhealthy's for: $(rule_for OctflowGPUUnhealthy) s, want $1; oldest scrape $(promql 'min(timestamp(up))'), reload at $hup)"
		sleep 1
	done
}
sed -E 's/^(  (scrape|evaluation)_interval:) 15s$/\1 5s/' "$CACHE/prometheus.yml.orig" >"$PROMDIR/prometheus.yml"
awk -v drilled="^($drilled)\$" '
	/^      - alert: / { d = ($3 ~ drilled) }
	d && /^        for: / { sub(/for: .*/, "for: 10s") }
	d && /\) > 300$/ { sub(/> 300$/, "> 20") }
	{ print }' "$CACHE/octflow-rules.yml.orig" >"$PROMDIR/rules/octflow.yml"
[ "$(diff "$CACHE/octflow-rules.yml.orig" "$PROMDIR/rules/octflow.yml" | grep -c '^>')" = 5 ] &&
	[ "$(diff "$CACHE/prometheus.yml.orig" "$PROMDIR/prometheus.yml" | grep -c '^>')" = 2 ] ||
	fail "the drills' waits changed other lines than the four for:, the collector's 300 s and the two intervals: $(diff "$CACHE/octflow-rules.yml.orig" "$PROMDIR/rules/octflow.yml"; diff "$CACHE/prometheus.yml.orig" "$PROMDIR/prometheus.yml")"
prometheus_reload 10
# What the drilled rules read is there, healthy, before anything is done:
# the disk-watch volume (the test's 64 MiB tmpfs) under node-exporter,
# gpu-1's two GPUs, the worker's certificate a long way off; and
# PostgreSQL's state, which the PostgreSQL rules read.
disk_free() { promql 'node_filesystem_avail_bytes{job="node",mountpoint="/watch/disk-watch"} / node_filesystem_size_bytes{job="node",mountpoint="/watch/disk-watch"}' | jq -r '.[0].value[1] // empty | tonumber * 100 | floor | "\(.)%"'; }
size=$(promql 'node_filesystem_size_bytes{job="node",mountpoint="/watch/disk-watch"}' | jq -r '.[0].value[1] // "none"')
[ "$size" = $((64 << 20)) ] || logs_and_fail "node-exporter's disk-watch is $size bytes, want the test's 64 MiB tmpfs: $(promql 'node_filesystem_size_bytes')"
[ "$(promql 'sum(octflow_gpu_healthy{node="gpu-1"})' | jq -r '.[0].value[1] // "none"')" = 2 ] ||
	logs_and_fail "gpu-1's GPUs are not both healthy before the drill: $(promql 'octflow_gpu_healthy')"
pg=$(promql 'pg_up{job="postgresql"}' | jq -r '.[0].value[1] // "none"')
conns=$(promql 'sum(pg_stat_database_numbackends{job="postgresql"})' | jq -r '.[0].value[1] // "none"')
maxc=$(promql 'max(pg_settings_max_connections{job="postgresql"})' | jq -r '.[0].value[1] // "none"')
[ "$pg" = 1 ] && [ "$maxc" = 150 ] && [ "$conns" -gt 0 ] ||
	logs_and_fail "postgres-exporter: pg_up $pg, numbackends $conns, max_connections $maxc; want 1, some, 150"
firing() { promql "ALERTS{alertname=~\"$drilled\", alertstate=\"firing\"}" | jq -r '[.[].metric.alertname] | unique | join(" ")'; }
[ -z "$(firing)" ] || logs_and_fail "drilled alerts firing before the drills: $(firing)"
echo "    before: disk-watch $(disk_free) free, PostgreSQL up with $conns of $maxc connections, gpu-1's GPUs healthy"

# The four, at once (each one's start kept).
drill_names=(OctflowAuditCollectorNotTaking OctflowGPUUnhealthy OctflowCertificateExpiring OctflowDiskFilling OctflowPostgresDown)
drill_receivers=(oncall tickets tickets oncall oncall)
drill_labels=('.labels.instance == "api:9464"' '.labels.node == "gpu-1" and .labels.gpu == "1"'
	'.labels.use == "temporal-client" and .labels.subject == "octflow-worker"' '.labels.mountpoint == "/watch/disk-watch"'
	'.labels.job == "postgresql"')
drill_start=()
# 1. The audit collector stopped, and a clinician's reads, which the api
# must record.
drill_start[0]=$(date +%s)
compose stop audit >/dev/null 2>&1 || logs_and_fail "docker compose stop audit"
for id in "${batch[@]}"; do status "$id" >/dev/null || logs_and_fail "the api did not answer a read with the collector stopped"; done
# 2. GPU 1 of gpu-1 throttled for heat: its simulated GPUs take their
# faults from the file compose.test.yml names.
drill_start[1]=$(date +%s)
compose exec -T gpu-1 sh -c 'echo "1 thermal" >/tmp/gpu-faults' || logs_and_fail "write gpu-1's faults file"
# 3. The worker's Temporal client certificate replaced by one of its key
# and role that expires in 20 days, signed with the offline CA, and the
# worker restarted to take it.
drill_start[2]=$(date +%s)
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$CACHE/drill-cert.ext"
openssl req -new -key "$SECRETS/temporal-worker-key.pem" -subj "/OU=octflow-worker/CN=octflow-worker" 2>/dev/null |
	openssl x509 -req -CA "$CA_OFFLINE/ca.pem" -CAkey "$CA_OFFLINE/ca-key.pem" -set_serial "0x$(rnd 8)" -days 20 \
		-extfile "$CACHE/drill-cert.ext" -out "$CACHE/drill-cert.pem" 2>/dev/null || fail "sign the worker's 20-day certificate"
cat "$CACHE/drill-cert.pem" >"$SECRETS/temporal-worker.pem" # in place: the file Compose mounts
compose restart worker >/dev/null 2>&1 || logs_and_fail "docker compose restart worker"
# 4. The disk under the volumes: 60 of disk-watch's 64 MiB written.
drill_start[3]=$(date +%s)
docker run --rm -v "${PROJECT}_disk-watch:/fill" octflow-test/alpine-like:1 dd if=/dev/zero of=/fill/drill bs=1M count=60 2>/dev/null ||
	logs_and_fail "fill the disk-watch volume"
step "drills: the audit collector stopped, gpu-1's GPU 1 throttled, the worker on a 20-day certificate, disk-watch 60 of 64 MiB full"
# 5. PostgreSQL stopped, once OctflowGPUUnhealthy is at its receiver
# (the api reads the GPUs' health from the nodes' reports through
# Temporal, which waits on PostgreSQL) and the worker restarted by 3. is
# healthy; below, in the same wait.
pg_drill() {
	local deadline=$(($(date +%s) + 60))
	until [ "$(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q worker)")" = healthy ]; do
		[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "the worker was not healthy within 60 s of its restart"
		sleep 1
	done
	drill_start[4]=$(date +%s)
	compose stop postgresql >/dev/null 2>&1 || logs_and_fail "docker compose stop postgresql"
	echo "    PostgreSQL stopped"
}
# Each alert, firing, at its receiver (page: oncall; ticket: tickets),
# with the labels that say what and where.
drill_took=()
deadline=$(($(date +%s) + 240))
while :; do
	got=$(received)
	left=0
	if [ -n "${drill_took[1]:-}" ] && [ -z "${drill_start[4]:-}" ]; then
		pg_drill
		deadline=$(($(date +%s) + 240))
	fi
	for i in "${!drill_names[@]}"; do
		[ -z "${drill_took[$i]:-}" ] || continue
		[ -n "${drill_start[$i]:-}" ] || { left=$((left + 1)) && continue; }
		if jq -e -s --arg n "${drill_names[$i]}" --arg r "${drill_receivers[$i]}" \
			"map(select(.receiver == \$r) | .alerts[] | select(.status == \"firing\" and .labels.alertname == \$n and (${drill_labels[$i]}))) | length > 0" \
			<<<"$got" >/dev/null 2>&1; then
			drill_took[i]=$(($(date +%s) - drill_start[i]))
			echo "    ${drill_names[$i]} at the ${drill_receivers[$i]} receiver ${drill_took[$i]} s after the drill began"
		else
			left=$((left + 1))
		fi
	done
	[ "$left" -gt 0 ] || break
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "$left drilled alerts did not reach their receivers within 4 minutes; ALERTS: $(promql "ALERTS{alertname=~\"$drilled\"}" | jq -c '[.[].metric | {alertname, alertstate}]'); received: $(jq -c -s 'map({receiver, alerts: [.alerts[] | "\(.labels.alertname) \(.status)"]})' <<<"$got" | cut -c1-600)"
	sleep 2
done
# The dead man's switch beside them: OctflowWatchdog, always firing, at
# the heartbeat receiver (init.sh's --heartbeat-url).
jq -e -s 'map(select(.receiver == "watchdog") | .alerts[] | select(.status == "firing" and .labels.alertname == "OctflowWatchdog")) | length > 0' <<<"$got" >/dev/null ||
	logs_and_fail "OctflowWatchdog, the dead man's switch, did not reach the watchdog receiver"
step "PASS: each drill reached its receiver: collector stopped ${drill_took[0]} s, GPU unhealthy ${drill_took[1]} s, certificate near expiry ${drill_took[2]} s, disk past 90% ${drill_took[3]} s, PostgreSQL down ${drill_took[4]} s; the dead man's switch at its own"

# And back, by the runbook: the collector started (the api's spool
# drains to it), the fault cleared, the certificate renewed with
# deploy/make-certs.sh (the CA key brought back for it, then taken
# offline again) and the worker restarted, the space freed.
T_BACK=$(date +%s)
compose start postgresql >/dev/null 2>&1 || logs_and_fail "docker compose start postgresql"
compose start audit >/dev/null 2>&1 || logs_and_fail "docker compose start audit"
compose exec -T gpu-1 sh -c ': >/tmp/gpu-faults' || logs_and_fail "clear gpu-1's faults file"
cp "$CA_OFFLINE/ca-key.pem" "$SECRETS/ca-key.pem"
rm -f "$SECRETS/temporal-worker.pem" "$SECRETS/temporal-worker-key.pem"
renewed=$(OCTFLOW_API_HOSTS=localhost "$RUN/deploy/make-certs.sh" "$SECRETS") || fail "deploy/make-certs.sh (renewal)"
rm -f "$SECRETS/ca-key.pem"
[ "$renewed" = "$(printf 'made temporal-worker.pem (octflow-worker; 825 days)')" ] || fail "make-certs.sh renewed other than the worker's certificate: $renewed"
# The stack back from PostgreSQL's stop (Temporal healthy again) before
# the worker restarts on its renewed certificate.
compose up -d --wait --wait-timeout 180 postgresql temporal >"$CACHE/logs/up-postgres.log" 2>&1 || {
	tail -20 "$CACHE/logs/up-postgres.log"
	logs_and_fail "PostgreSQL and Temporal did not come back healthy after the drill"
}
compose restart worker >/dev/null 2>&1 || logs_and_fail "docker compose restart worker"
docker run --rm -v "${PROJECT}_disk-watch:/fill" octflow-test/alpine-like:1 rm -f /fill/drill || logs_and_fail "free the disk-watch volume"
deadline=$(($(date +%s) + 120))
until [ "$(promql 'sum(octflow_audit_pending_records)' | jq -r '.[0].value[1] // "none"')" = 0 ] &&
	[ "$(promql 'sum(octflow_gpu_healthy{node="gpu-1"})' | jq -r '.[0].value[1] // "none"')" = 2 ] &&
	[ "$(promql 'min(octflow_certificate_expiry_timestamp_seconds{subject="octflow-worker"}) - time() > 800 * 86400' | jq length)" = 1 ] &&
	[ -z "$(firing)" ]; do
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "the drills did not clear within 2 minutes: firing $(firing); pending audit records $(promql 'octflow_audit_pending_records' | jq -c '[.[].value[1]]'), gpu-1 $(promql 'octflow_gpu_healthy{node="gpu-1"}' | jq -c '[.[].value[1]]')"
	sleep 2
done
# And an exam, submitted after PostgreSQL's return, completes.
submit 1
check "${batch[@]}"
step "PASS: after the runbook's fixes, in $(($(date +%s) - T_BACK)) s: the api's audit spool drained to the collector, gpu-1's GPUs healthy, the worker on a renewed certificate, disk-watch $(disk_free) free, PostgreSQL up and an exam completed after it; none of the five firing"
cp "$CACHE/prometheus.yml.orig" "$PROMDIR/prometheus.yml"
cp "$CACHE/octflow-rules.yml.orig" "$PROMDIR/rules/octflow.yml"
prometheus_reload 120
step "alert drills: $(($(date +%s) - T_DRILLS)) s in all; Prometheus back on the shipped rules and intervals"

# --- what Grafana shows: its datasource and every dashboard's queries -----
# Grafana itself is not built here (no Debian package; its Go module is
# not served to these machines, and its front end is a JavaScript build:
# docs/operations.md). What it would show is checked instead: the
# datasource's URL (deploy/grafana/provisioning) answers on the stack's
# network, and every query of every provisioned dashboard evaluates on
# the stack's Prometheus; those of the platform dashboard (Temporal's
# server, PostgreSQL, the disk) each with data (Temporal's error counters
# only once an error was counted).
ds=$(awk '$1 == "url:" { print $2 }' "$RUN/deploy/grafana/provisioning/datasources/prometheus.yml")
[ "$ds" = http://prometheus:9090 ] || fail "the provisioned datasource's URL is '$ds'"
# (No -T: the stand-in's busybox 1.35 wget segfaults with a timeout set.)
deadline=$(($(date +%s) + 30))
until got=$(compose exec -T alert-sink wget -q -O - "$ds/api/v1/query?query=up" 2>&1) &&
	jq -e '.status == "success" and (.data.result | length > 5)' <<<"$got" >/dev/null 2>&1; do
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "the datasource's URL $ds does not answer on the stack's network: $(cut -c1-300 <<<"$got")"
	sleep 2
done
queries=0 empty=()
for f in "$RUN"/deploy/grafana/dashboards/*.json; do
	mapfile -t exprs < <(jq -r '.panels[].targets[].expr' "$f")
	for e in "${exprs[@]}"; do
		e=${e//\$node/.*}
		r=$(curl -sS -m 10 --data-urlencode "query=$e" "$PROM/api/v1/query") || logs_and_fail "Prometheus did not answer $e"
		jq -e '.status == "success"' <<<"$r" >/dev/null || logs_and_fail "$(basename "$f"): Prometheus refuses $e: $(jq -r .error <<<"$r")"
		queries=$((queries + 1))
		case "$f:$e" in
		*/octflow-platform.json:*_error_with_type*) ;;
		*/octflow-platform.json:*) [ "$(jq '.data.result | length' <<<"$r")" -gt 0 ] || empty+=("$e") ;;
		esac
	done
done
# A panel's data is there once its target's last scrape succeeded: one
# failed scrape (a timeout on the busy test machine) marks the target's
# series stale until the next, so an empty query is asked again for up
# to four scrape intervals before it counts as a panel without data.
deadline=$(($(date +%s) + 60)) retried=0 late=("${empty[@]}")
while [ ${#empty[@]} -gt 0 ] && [ "$(date +%s)" -lt "$deadline" ]; do
	sleep 5
	retried=$((retried + 1))
	still=()
	for e in "${empty[@]}"; do
		[ "$(promql "$e" | jq length)" -gt 0 ] || still+=("$e")
	done
	empty=("${still[@]}")
done
[ ${#empty[@]} = 0 ] || logs_and_fail "the platform dashboard's queries without data for a minute: ${empty[*]}; targets not up: $(curl -fsS -m 10 "$PROM/api/v1/targets" | jq -c '[.data.activeTargets[] | select(.health != "up") | {job: .labels.job, instance: .labels.instance, health, lastError, lastScrapeDuration}]')"
[ "$retried" = 0 ] || echo "    with data only $retried tries (5 s apart) later: ${late[*]}"
step "PASS: Grafana's datasource ($ds) answers on the stack's network; the $(find "$RUN/deploy/grafana/dashboards" -name '*.json' | wc -l) dashboards' $queries queries evaluate on its Prometheus, the Temporal, PostgreSQL and disk panels with data"

# --- every scrape over TLS, checked ---------------------------------------
# Prometheus scrapes every target of the stack over HTTPS, each
# certificate checked against the stack's CA and the name the target is
# scraped by (deploy/prometheus/prometheus.yml), and reaches Alertmanager
# so; every target is up. Only its own scrape, over its container's
# loopback, is plain. The octflow processes export the metrics
# certificate's expiry (use metrics-server). An octflow metrics port
# answers no plain HTTP on the metrics network: from gpu-0, there, the
# api's /metrics over HTTPS with the stack's CA, nothing over HTTP.
notls() { jq -c '[.data.activeTargets[] | select(.health != "up" or ((.scrapeUrl | startswith("https://")) | not) and .labels.job != "prometheus") | {job: .labels.job, scrapeUrl, health, lastError}]'; }
deadline=$(($(date +%s) + 60))
until targets=$(curl -fsS -m 10 "$PROM/api/v1/targets") && [ "$(notls <<<"$targets")" = "[]" ]; do
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "scrapes not over HTTPS or not up for a minute: $(notls <<<"$targets")"
	sleep 5
done
jobs=$(jq -r '[.data.activeTargets[].labels.job] | unique | join(" ")' <<<"$targets")
[ "$jobs" = "alertmanager node octflow-api octflow-gpuworker octflow-worker postgresql prometheus temporal" ] || logs_and_fail "Prometheus scrapes the jobs $jobs"
ams=$(curl -fsS -m 10 "$PROM/api/v1/alertmanagers" | jq -r '[.data.activeAlertmanagers[].url] | join(" ")')
[[ "$ams" == https://* ]] && [[ "$ams" != *" "* ]] || logs_and_fail "Prometheus sends its alerts to $ams, want Alertmanager over HTTPS"
# Asked again for up to a minute: Prometheus has just been put back on
# the shipped intervals, and a target's series are stale until its next
# scrape.
deadline=$(($(date +%s) + 60))
until held=$(promql 'octflow_certificate_expiry_timestamp_seconds{use="metrics-server"}' | jq -r '[.[] | "\(.metric.job)=\(.metric.subject)"] | unique | join(" ")') &&
	[ "$held" = "octflow-api=octflow-metrics octflow-gpuworker=octflow-metrics octflow-worker=octflow-metrics" ]; do
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "the metrics certificate's expiry, by job, for a minute: '$held'"
	sleep 5
done
compose exec -T gpu-0 curl -fsS -m 5 -o /dev/null --cacert /run/secrets/ca.pem https://api:9464/metrics ||
	logs_and_fail "gpu-0 did not get the api's /metrics over HTTPS, checked with the stack's CA"
plain=$(compose exec -T gpu-0 curl -s -m 5 -o /dev/null -w '%{http_code}' http://api:9464/metrics || true)
[ "$plain" != 200 ] || logs_and_fail "the api's metrics port answered plain HTTP 200 on the metrics network"
step "PASS: every scrape over HTTPS, checked against the stack's CA ($(jq '.data.activeTargets | length' <<<"$targets") targets up; Prometheus's own over its loopback excepted), alerts to $ams; the metrics certificate's expiry exported; plain HTTP to the api's metrics port from gpu-0 answered ${plain:-nothing}"

# --- a GPU node on another host ----------------------------------------------
# deploy/compose.remote-node.yml in a project (and network) of its own,
# reaching the stack only through host-gateway at the published Temporal
# (mTLS) and S3 proxy (TLS, client certificate) ports, with its own
# certificate and S3 account. The stack's own GPU nodes are stopped (they
# drain) so the exams run on it; then it leaves (drains, and the fleet
# forgets it) and they come back.
nodes_up() { curl -fsS -m 10 --data-urlencode 'query=octflow_node_up' "$PROM/api/v1/query" | jq -r '[.data.result[] | "\(.metric.node)=\(.value[1])"] | sort | join(" ")'; }
until_nodes() { # WANT
	local got deadline=$(($(date +%s) + 120))
	until got=$(nodes_up) && [ "$got" = "$1" ]; do
		[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "GPU nodes in Prometheus: '$got', want '$1'"
		sleep 3
	done
}
step "a GPU node on another network: $NODE_ID through $TEMPORAL_PUB (Temporal) and $S3_PUB (S3 proxy)"
node up -d --wait --wait-timeout 180 >>"$CACHE/logs/up.log" 2>&1 || {
	node logs --no-color --tail 20 2>&1 | cut -c1-400
	logs_and_fail "the GPU node on another network did not come up"
}
[ "$(docker inspect -f '{{range $n, $_ := .NetworkSettings.Networks}}{{$n}} {{end}}' "$(node ps -q gpu)")" = "$PROJECT-node_default " ] ||
	logs_and_fail "the remote GPU node is on a network of the stack"
# Without its certificate: Temporal and the S3 proxy refuse it.
if out=$(node run --rm --no-deps -T -e OCTFLOW_TEMPORAL_CERT_FILE= -e OCTFLOW_TEMPORAL_KEY_FILE= -e OCTFLOW_SETUP_WAIT=5s gpu setup 2>&1); then
	logs_and_fail "Temporal's published frontend served the remote node without its certificate: $(tail -3 <<<"$out")"
fi
if out=$(node run --rm --no-deps -T --entrypoint curl gpu -sS -m 10 -o /dev/null -w '%{http_code}' --cacert /run/secrets/ca.pem \
	--connect-to "s3-proxy:443:octflow-stack:${S3_PUB##*:}" https://s3-proxy/ 2>&1); then
	logs_and_fail "the published S3 proxy served the remote node without its certificate: $out"
fi
# ...and refused it in the TLS handshake, for want of a certificate (not
# a wrong port or a timeout).
grep -qiE 'alert|certificate|handshake' <<<"$out" ||
	logs_and_fail "the S3 proxy's refusal was not a TLS refusal: $out"
echo "    without its certificate, the S3 proxy: $(tail -1 <<<"$out" | cut -c1-160)"
until_nodes "gpu-0=1 gpu-1=1 $NODE_ID=1"
compose stop gpu-0 gpu-1 >/dev/null 2>&1 || logs_and_fail "docker compose stop gpu-0 gpu-1"
submit 3
check "${batch[@]}"
ran=$(for id in "${batch[@]}"; do
	curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$id/events" | jq -r '.[] | .actor // empty'
done | { grep -E '^gpu-' || true; } | sort -u | tr '\n' ' ')
[ "$ran" = "$NODE_ID " ] || logs_and_fail "with only the remote node up, the GPU stages ran on: $ran"
step "PASS: the remote GPU node ran 3 exams to COMPLETED (GPU stages on: $ran); refused by Temporal and the S3 proxy without its certificate"
# Its S3 account reads an exam's scan and stage outputs and writes only
# what GPU stages write: an exam's report (like its record, markers and
# sealed identity) can be neither read, overwritten nor deleted from the
# node. Reading the exam's layers is the control that the account and the
# path are right.
node_s3() { # METHOD KEY: the status S3 answers the node's own account
	node run --rm --no-deps -T --entrypoint sh gpu -c '
		method=$1 key=$2
		shift 2
		[ "$method" != PUT ] || set -- --data-binary overwritten
		curl -sS -m 10 -o /dev/null -w "%{http_code}" --aws-sigv4 "aws:amz:us-east-1:s3" \
			--user "$(cat /run/secrets/s3-access-key):$(cat /run/secrets/s3-secret-key)" \
			-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X "$method" "$@" "http://s3-tunnel:7070/octflow/$key"' sh "$1" "$2"
}
key=$(status "${batch[0]}" | jq -r '.report.jsonKey // empty')
[ -n "$key" ] || logs_and_fail "exam ${batch[0]}: no report key in its status"
layers=${key%/report.json}/layers.json
for want in "GET $layers 200" "GET $key 403" "PUT $key 403" "DELETE $key 403" "DELETE $layers 403" "GET $layers 200"; do
	read -r m k w <<<"$want"
	code=$(node_s3 "$m" "$k") || true
	[ "$code" = "$w" ] || logs_and_fail "the remote node's S3 account: $m $k answered '$code', want $w"
done
step "PASS: the remote node's S3 account reads the exam's layers, not its report, and may neither overwrite nor delete anything"
# as_s3 SERVICE ACCOUNT METHOD KEY: the status S3 answers SERVICE's own
# account (its ACCOUNT-s3-*-key secrets), from inside SERVICE.
as_s3() {
	compose exec -T "$1" sh -c '
		account=$1 method=$2 key=$3
		curl -sS -m 10 -o /dev/null -w "%{http_code}" --cacert /run/secrets/ca.pem --aws-sigv4 "aws:amz:us-east-1:s3" \
			--user "$(cat /run/secrets/$account-s3-access-key):$(cat /run/secrets/$account-s3-secret-key)" \
			-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X "$method" "https://s3:7070/octflow/$key"' sh "$2" "$3" "$4"
}
# The api's account reads and writes, and deletes nothing but its intake
# markers: an exam's report stays.
for want in "GET $key 200" "DELETE $key 403" "GET $key 200"; do
	read -r m k w <<<"$want"
	code=$(as_s3 api api "$m" "$k") || true
	[ "$code" = "$w" ] || logs_and_fail "the api's S3 account: $m $k answered '$code', want $w"
done
step "PASS: the api's S3 account reads an exam's report and may not delete it"
compose up -d --wait --wait-timeout 180 gpu-0 gpu-1 >>"$CACHE/logs/up.log" 2>&1 || logs_and_fail "gpu-0 and gpu-1 did not come back"
# This host's GPU services have a node's account too, not octflow's.
for want in "GET $layers 200" "GET $key 403" "DELETE $layers 403"; do
	read -r m k w <<<"$want"
	code=$(as_s3 gpu-0 gpu "$m" "$k") || true
	[ "$code" = "$w" ] || logs_and_fail "gpu-0's S3 account: $m $k answered '$code', want $w"
done
step "PASS: gpu-0's S3 account reads the exam's layers, not its report, and deletes nothing"
node down >/dev/null 2>&1 || logs_and_fail "docker compose down (the remote node)"
until_nodes "gpu-0=1 gpu-1=1"
step "PASS: the remote node left (drained, forgotten); gpu-0 and gpu-1 back"

# The worker's SLA-breach counter is there at 0 before any breach: the
# first breach is a rise that increase() sees.
deadline=$(($(date +%s) + 90))
until [ "$(promql 'octflow_urgent_sla_breaches_total{job="octflow-worker"}' | jq -r '[.[].value[1]] | join(",")')" = 0 ]; do
	[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "Prometheus has no octflow_urgent_sla_breaches_total at 0 from the worker: $(promql octflow_urgent_sla_breaches_total)"
	sleep 3
done
step "PASS: the worker's octflow_urgent_sla_breaches_total is scraped at 0 before any breach"
# One urgent exam, past its 3 s SLA (compose.test.yml) before its report:
# OctflowUrgentSLABreach goes from the rule through Alertmanager to the
# receiver; checked after the outages, which it runs beside.
n=$((n + 1))
f=$scans/phantom-$n.dcm
[ -s "$f" ] || bin/octflow phantom --out "$f" --seed "$((700 + n))" --frames 5 --rows 128 --cols 128 >/dev/null
urgent=$(OCTFLOW_TOKEN=$DEVICE bin/octflow submit --api "$API" --file "$f" --priority urgent --exam-id "compose-urgent-$(rnd 3)" 2>&1) ||
	logs_and_fail "submit the urgent exam: $urgent"
urgent=$(sed -n '/^{/,$p' <<<"$urgent" | jq -r .examId)
all+=("$urgent")
T_URGENT=$(date +%s)
step "submitted urgent exam $urgent with a 3 s SLA"

if [ "${OCTFLOW_COMPOSE_OUTAGES:-1}" = 1 ]; then
	# A GPU node's container killed (SIGKILL, no drain) in the middle of a stage.
	submit 4
	hit=$(gpu_stage "${batch[@]}") || exit 1
	read -r exam stage node <<<"$hit"
	step "killing GPU node $node (its service's container) while $exam runs $stage"
	docker kill "$(compose ps -q "$node")" >/dev/null || logs_and_fail "docker kill the container of $node"
	check "${batch[@]}"
	step "PASS: a GPU node killed mid-stage; every exam COMPLETED, one report each"
	compose up -d --wait --wait-timeout 180 >>"$CACHE/logs/up.log" 2>&1 ||
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

	# GPU nodes 2 → 3 → 2: gpu-2 from the template (docker-compose.override.yml),
	# then stopped (it drains) and removed. Every node under its own ID;
	# the fleet forgets gpu-2, so no NodeDown is left for it.
	gpu3() { compose -f docker-compose.override.yml -f compose.gpu.test.yml "$@"; }
	nodes_up() { promql 'octflow_node_up' | jq -r '[.[] | "\(.metric.node)=\(.value[1])"] | sort | join(" ")'; }
	# wait_nodes WANT: until the api's octflow_node_up (through Prometheus) is WANT.
	wait_nodes() {
		local got deadline=$(($(date +%s) + 120))
		until got=$(nodes_up) && [ "$got" = "$1" ]; do
			[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "GPU nodes in Prometheus: '$got', want '$1'"
			sleep 3
		done
	}
	wait_nodes "gpu-0=1 gpu-1=1"
	step "scaling GPU nodes 2 → 3: gpu-2 from deploy/compose.gpu.example.yml"
	gpu3 up -d --wait --wait-timeout 180 gpu-2 >>"$CACHE/logs/up.log" 2>&1 || logs_and_fail "gpu-2 did not come up"
	wait_nodes "gpu-0=1 gpu-1=1 gpu-2=1"
	submit 6
	check "${batch[@]}"
	# The timeline's actor of each stage's EXECUTING: the node that ran it.
	ran=$(for id in "${batch[@]}"; do
		curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$id/events" | jq -r '.[] | .actor // empty'
	done | { grep -E '^gpu-[0-9]+$' || true; } | sort -u | tr '\n' ' ')
	step "PASS: three GPU nodes, gpu-0 gpu-1 gpu-2; the last exams ran on: $ran"
	step "scaling GPU nodes 3 → 2: gpu-2 stopped (it drains) and removed"
	gpu3 stop gpu-2 >/dev/null 2>&1 || logs_and_fail "docker compose stop gpu-2"
	gpu3 rm -f gpu-2 >/dev/null 2>&1 || logs_and_fail "docker compose rm gpu-2"
	wait_nodes "gpu-0=1 gpu-1=1"
	low=$(promql 'min_over_time(octflow_node_up{node="gpu-2"}[15m])' | jq -r '.[0].value[1] // "none"')
	[ "$low" = 1 ] || logs_and_fail "gpu-2 was reported down (octflow_node_up's lowest value: $low) on its way out"
	step "PASS: gpu-2 drained and was forgotten, never down"

	# Before the release restarts the worker (and with it its counter).
	alert_received

	# A release, by the documented procedure (deploy/upgrade.sh;
	# docs/operations.md, Upgrades), from the newest release CHANGELOG.md
	# records (1.0.0), rebuilt from its commit, to this tree with a
	# workflow change the test applies: a CPU stage "drill" added after
	# measure, guarded by no GetVersion.
	#
	# First the stack as that release ran it: its worker and GPU nodes on
	# the release's image, its build current (promoted by its own CLI).
	# Every exam so far is COMPLETED; their reviews, pinned to this tree's
	# build, wait for its worker, back after the drill. On the release:
	# exams in review; with the PACS stopped, their exports in retry
	# waits; and a stream of exams, one every 2 s, so that the promotion
	# finds exams in flight at every stage. Then the upgrade: the next
	# build's worker beside the release's, promoted after the replay
	# gate, the GPU nodes moved one at a time. Then: every exam COMPLETED
	# with one report, none lost or run twice; those started before the
	# promotion finished on the release (no drill stage), those after ran
	# the new build; the waiting exports delivered by the release's
	# worker; a review decided on the release; no workflow task failed for
	# nondeterminism; GPU capacity never zero. Then a rollback: new exams
	# on the release again.
	T_UPGRADE=$(date +%s)
	# OCTFLOW_COMPOSE_FROM_RELEASE=0: from this tree's own build instead
	# (a quicker drill of the procedure alone).
	if [ "${OCTFLOW_COMPOSE_FROM_RELEASE:-1}" = 1 ]; then
		release=$(sed -n 's/^## \([0-9][0-9.]*\) .*/\1/p' CHANGELOG.md | sed -n 1p)
		rcommit=$(awk -v h="## $release " 'index($0, h) == 1 { f = 1; next } f && /^Commit: / { print $2; exit }' CHANGELOG.md)
		# A shallow clone lacks it: its history is fetched.
		if ! git cat-file -e "$rcommit^{commit}" 2>/dev/null && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
			git fetch --quiet --unshallow || true
		fi
		[ -n "$release" ] && git cat-file -e "$rcommit^{commit}" 2>/dev/null ||
			fail "CHANGELOG.md's newest release '$release' names commit '$rcommit', which this clone does not have (a shallow clone? git fetch --unshallow)"
		rsrc=$CACHE/release-src
		rm -rf "$rsrc" && mkdir -p "$rsrc"
		git archive "$rcommit" | tar -x -C "$rsrc" || fail "git archive $rcommit"
		(cd "$rsrc" && nice -n 10 make --no-print-directory build VERSION="$release" COMMIT="$rcommit" >/dev/null) ||
			fail "building $release from its commit $rcommit"
		RIMAGE=octflow-test/octflow:$release
		runtime_image "$RIMAGE" "$rsrc/Dockerfile" "$rsrc/bin/octflow"
		rbuild=$(docker run --rm --entrypoint octflow "$RIMAGE" version | sed -n 's/^build ID //p')
		case "$rbuild" in "$release+${rcommit:0:12}") ;; *) fail "$RIMAGE says build '$rbuild', want $release+${rcommit:0:12}" ;; esac
	else
		release="this tree's build" rbuild=$(bin/octflow version | sed -n 's/^build ID //p')
	fi
	src=$CACHE/next-src
	rm -rf "$src" && mkdir -p "$src"
	git ls-files -z | xargs -0 cp --parents -t "$src"
	cat >"$src/activities/drill.go" <<'GO'
package activities

import (
	"context"

	"octflow/contract"
	"octflow/exam"
)

// The compose test's upgrade drill adds this stage (not part of octflow).
func drillSpec() exam.StageSpec { return exam.StageSpec{Stage: "drill", Activity: "WriteDrillNote"} }

// WriteDrillNote does nothing but say it ran.
func (a *Activities) WriteDrillNote(_ context.Context, _ contract.StageInput) (contract.StageOutput, error) {
	return contract.StageOutput{Node: a.Node, Algorithm: "drill/v1"}, nil
}
GO
	sed -i 's|^\t\tStageOf(measureSpec(), (\*Activities).Measure),$|&\n\t\tStageOf(drillSpec(), (*Activities).WriteDrillNote),|' "$src/activities/stages.go"
	grep -q WriteDrillNote "$src/activities/stages.go" || fail "the drill's stage was not added to activities.Pipeline()"
	(cd "$src" && nice -n 10 make --no-print-directory build VERSION="$(cat VERSION)-drill" COMMIT="drill-$(rnd 4)" >/dev/null) ||
		fail "building the next build"
	c=$(ctx octflow-next)
	cp "$src/bin/octflow" "$c/octflow"
	printf 'FROM octflow-test/octflow:dev\nCOPY octflow /usr/local/bin/octflow\n' >"$c/Dockerfile"
	build octflow-test/octflow:next "$c/Dockerfile" "$c"
	upgrade() { (cd "$RUN" && OCTFLOW_COMPOSE=$COMPOSE_BIN COMPOSE_PROJECT_NAME=$PROJECT COMPOSE_FILE=docker-compose.yml:compose.test.yml deploy/upgrade.sh "$@"); }
	# stages ID: the stages the exam's timeline shows.
	stages() { curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$1/events" | jq -r '[.[] | .stage // empty] | unique | join(" ")'; }

	# moved SERVICE BUILD: BUILD made current again by `deployment
	# rollback` from SERVICE's image, which wakes the fleet and the
	# inboxes until they are on it; they must be before the worker of the
	# build they leave goes (each is pinned to its build until it
	# continues as new, and with no worker of that build nothing serves
	# it: no node reports, no notifications).
	moved() {
		local out deadline=$(($(date +%s) + 90))
		out=$(compose run --rm --no-deps -T "$1" deployment rollback --build-id "$2" 2>&1) ||
			logs_and_fail "deployment rollback --build-id $2 from $1: $out"
		until grep -q "the fleet and the inboxes run on build $2" <<<"$out"; do
			[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "the fleet and the inboxes did not move onto build $2: $out"
			sleep 5
			out=$(compose run --rm --no-deps -T "$1" deployment status 2>&1) || true
		done
	}
	if [ "${OCTFLOW_COMPOSE_FROM_RELEASE:-1}" = 1 ]; then
		# The stack on the release, reached as builds are changed: the
		# release's worker beside this tree's, its build made current by
		# its own CLI, the fleet and the inboxes moved onto it while this
		# tree's worker still serves them; then the worker and the GPU
		# nodes on the release's image, and the one beside gone.
		OCTFLOW_NEXT_IMAGE=$RIMAGE compose up -d --no-deps --wait --wait-timeout 300 worker-next >>"$CACHE/logs/up.log" 2>&1 ||
			logs_and_fail "$release's worker beside this tree's"
		out=$(OCTFLOW_NEXT_IMAGE=$RIMAGE compose run --rm --no-deps -T worker-next-deployment deployment promote 2>&1) ||
			logs_and_fail "$release's own promote of its build: $out"
		grep -q "$rbuild is current" <<<"$out" || logs_and_fail "$release's promote did not make $rbuild current: $out"
		# 1.0.0's promote wakes them once, and a wake spent before the
		# routing reaches their queue leaves them where they were (its
		# known limit, CHANGELOG.md).
		moved worker-deployment "$rbuild"
		OCTFLOW_IMAGE=$RIMAGE compose up -d --no-deps --wait --wait-timeout 300 worker gpu-0 gpu-1 >>"$CACHE/logs/up.log" 2>&1 ||
			logs_and_fail "the worker and GPU nodes on $RIMAGE"
		compose rm -sf worker-next >/dev/null 2>&1
		wait_nodes "gpu-0=1 gpu-1=1"
		step "the stack on $release ($RIMAGE, built from $rcommit): worker and GPU nodes on it, build $rbuild current, the fleet and the inboxes on it"
	fi
	# On the release: exams in review, their exports waiting to retry.
	compose stop pacs >/dev/null 2>&1 || logs_and_fail "docker compose stop pacs"
	submit 2
	reviewing=("${batch[@]}")
	check "${reviewing[@]}"
	deadline=$(($(date +%s) + 60))
	for id in "${reviewing[@]}"; do
		until [ "$(status "$id" | jq -r '.export | select(.status == "pending" and .tries >= 1 and (.failure // "") != "") | .tries')" != "" ]; do
			[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "exam $id's export did not fail a try with the PACS stopped: $(status "$id" | jq -c .export)"
			sleep 2
		done
	done
	# The stream: an exam every 2 s until told to stop, each one's ID a
	# line of $stream as its submission returns (a failed submission: its
	# output in $stream.err, and the stream ends).
	stream=$CACHE/stream.txt stop_stream=$CACHE/stream.stop
	: >"$stream" && rm -f "$stop_stream" "$stream.err"
	(
		k=$n
		while [ ! -e "$stop_stream" ]; do
			k=$((k + 1))
			f=$scans/phantom-$k.dcm
			[ -s "$f" ] || bin/octflow phantom --out "$f" --seed "$((700 + k))" --frames 5 --rows 128 --cols 128 >/dev/null 2>"$stream.err" || exit 1
			out=$(OCTFLOW_TOKEN=$DEVICE bin/octflow submit --api "$API" --file "$f" --exam-id "compose-$k-$(rnd 3)" 2>&1) || {
				printf '%s\n' "$out" >"$stream.err"
				exit 1
			}
			printf '%s %s\n' "$(date +%s)" "$(sed -n '/^{/,$p' <<<"$out" | jq -r .examId)" >>"$stream"
			sleep 2
		done
	) &
	streamer=$!
	until [ "$(wc -l <"$stream")" -ge 4 ]; do
		kill -0 "$streamer" 2>/dev/null || logs_and_fail "the stream of exams stopped after $(wc -l <"$stream"): $(cat "$stream.err" 2>/dev/null)"
		sleep 1
	done
	hit=$(gpu_stage $(cut -d' ' -f2 "$stream")) || exit 1
	step "upgrading $release to octflow-test/octflow:next (a drill stage added): exams streaming in, 2 in review with their exports waiting to retry ($hit)"
	T_START=$(date +%s)
	# Each line of the script's output with the time it came.
	if ! upgrade start octflow-test/octflow:next 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$(date +%s)" "$l"; done >"$CACHE/logs/upgrade.log"; then
		touch "$stop_stream"
		tail -30 "$CACHE/logs/upgrade.log"
		logs_and_fail "deploy/upgrade.sh start"
	fi
	# The promotion began and ended (the routing reaches the queues
	# within seconds after: exams started from 5 s before to 5 s after
	# may have gone either way).
	T_PROMOTING=$(awk '/upgrade: promoting the new build/ { print $1; exit }' "$CACHE/logs/upgrade.log")
	T_PROMOTED=$(awk '/ is current \(was / { print $1; exit }' "$CACHE/logs/upgrade.log")
	[ -n "$T_PROMOTING" ] && [ -n "$T_PROMOTED" ] || logs_and_fail "deploy/upgrade.sh start said no promotion: $(tail -5 "$CACHE/logs/upgrade.log")"
	cut -d' ' -f2- "$CACHE/logs/upgrade.log" | grep -E '^(replay gate|build |  )' | sed 's/^/    /'
	sleep 16 # new exams on the new build
	touch "$stop_stream"
	wait "$streamer" || logs_and_fail "the stream of exams failed after $(wc -l <"$stream"): $(cat "$stream.err" 2>/dev/null)"
	n=$((n + $(wc -l <"$stream")))
	mapfile -t streamed < <(cut -d' ' -f2 "$stream")
	all+=("${streamed[@]}")
	check "${streamed[@]}"
	compose start pacs >/dev/null 2>&1 || logs_and_fail "docker compose start pacs"
	# Started before the promotion (submitted a second or more before):
	# on the release, no drill stage; after it: the drill. Those in
	# flight at the promotion, with the stage each was at.
	before=0 after=0 at=() across=""
	while read -r t id; do
		ran=$(stages "$id")
		if [ "$t" -lt "$T_PROMOTING" ]; then
			case " $ran " in *" drill "*) logs_and_fail "exam $id, started on $release before the promotion, ran the new build's stage: $ran" ;; esac
			before=$((before + 1))
			events=$(curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$API/v1/exams/$id/events")
			open=$(jq -r --argjson p "$T_PROMOTING" '[.[] | select((.at | sub("\\.[0-9]+"; "") | fromdateiso8601) < $p)] | last | select(. != null and .to != "COMPLETED") | "\(.to)/\(.stage // "-")"' <<<"$events")
			[ -z "$open" ] || at+=("$open") across+=" ${open#*/}"
			across+=" $(jq -r --argjson p "$T_PROMOTING" '[.[] | select(.stage != null and (.at | sub("\\.[0-9]+"; "") | fromdateiso8601) >= $p) | .stage] | unique | join(" ")' <<<"$events")"
		elif [ "$t" -gt "$((T_PROMOTED + 5))" ]; then
			case " $ran " in *" drill "*) ;; *) logs_and_fail "exam $id, started after the promotion, did not run the new build: $ran" ;; esac
			after=$((after + 1))
		fi
	done <"$stream"
	[ "${#at[@]}" -gt 0 ] && [ "$after" -gt 0 ] ||
		logs_and_fail "the stream had ${#at[@]} exams in flight at the promotion and $after after it; want some of each"
	echo "    in flight as the promotion began: $(printf '%s\n' "${at[@]}" | sort | uniq -c | tr -s ' \n' ' ')"
	# The stages the release's exams were in after the promotion began
	# (in one then, or entered later), said, not required: an exam
	# passes denoise within a second or two of its submission, so with
	# one every 2 s the promotion finds none there in about one run of
	# three.
	echo "    stages the release's exams were in after the promotion began: $(tr ' ' '\n' <<<"$across" | sed '/^$/d' | sort | uniq -c | tr -s ' \n' ' ')"
	# The exports that waited: delivered by the release's worker once the
	# PACS was back, after more than one try.
	deadline=$(($(date +%s) + 330))
	for id in "${reviewing[@]}"; do
		until exp=$(status "$id" | jq -c '.export // {}') && [ "$(jq -r .status <<<"$exp")" = delivered ]; do
			[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "exam $id's export, in a retry wait through the upgrade, not delivered 5 minutes after the PACS came back: $exp"
			sleep 3
		done
		[ "$(jq .tries <<<"$exp")" -ge 2 ] || logs_and_fail "exam $id's export delivered at its first try; want a retry: $exp"
		case " $(stages "$id") " in *" drill "*) logs_and_fail "exam $id, in review on $release, ran the new build's stage" ;; esac
	done
	# A review decided on the release's worker, after the upgrade.
	code=$(curl -sS -m 30 -o "$scans/review.json" -w '%{http_code}' -H "Authorization: Bearer $CLINICIAN" -H 'Content-Type: application/json' \
		--data '{"decision": "approve", "note": "compose-test: after the upgrade"}' "$API/v1/exams/${reviewing[0]}/review") || true
	[ "$code" = 200 ] && [ "$(status "${reviewing[0]}" | jq -r .review)" = approved ] ||
		logs_and_fail "a review on $release after the upgrade answered $code: $(cat "$scans/review.json"); review $(status "${reviewing[0]}" | jq -c .review)"
	if compose logs worker worker-next 2>&1 | grep -i -m 3 'nondetermin'; then
		logs_and_fail "a workflow task failed for nondeterminism during the upgrade"
	fi
	span=$(($(date +%s) - T_START + 30))
	least=$(promql "min_over_time(sum(octflow_node_up)[${span}s:5s])" | jq -r '.[0].value[1] // "none"')
	[ "$least" != none ] && [ "$least" -ge 1 ] || logs_and_fail "GPU capacity during the upgrade: at least $least node(s) up, want 1 or more"
	upgrade status 2>&1 | sed 's/^/    /'
	# finish waits for the release's reviews (open on every exam it ran):
	# it refuses, and changes nothing.
	env_before=$(cat "$RUN/.env")
	if out=$(upgrade finish 2>&1); then
		logs_and_fail "deploy/upgrade.sh finish went ahead with $release's reviews open: $out"
	fi
	grep -q "may not go yet" <<<"$out" && [ "$(cat "$RUN/.env")" = "$env_before" ] ||
		logs_and_fail "deploy/upgrade.sh finish with $release's reviews open: $out (and .env changed: $(diff <(echo "$env_before") "$RUN/.env"))"
	step "PASS: upgraded $release with exams in flight ($before started before the promotion, ${#at[@]} of them mid-pipeline as it began): they finished on $release, $after new ones ran the new build's drill stage; 2 exports in retry waits delivered by $release's worker; a review decided on it; no nondeterminism; GPU nodes up throughout (at least $least)"

	upgrade rollback >>"$CACHE/logs/upgrade.log" 2>&1 || {
		tail -20 "$CACHE/logs/upgrade.log"
		logs_and_fail "deploy/upgrade.sh rollback"
	}
	submit 2
	check "${batch[@]}"
	for id in "${batch[@]}"; do
		case " $(stages "$id") " in *" drill "*) logs_and_fail "exam $id, started after the rollback, ran the new build" ;; esac
	done
	grep -q "the fleet and the inboxes run on build $rbuild" "$CACHE/logs/upgrade.log" || moved worker-next-deployment "$rbuild"
	# The new build's exams are done; its reviews stay open, pinned to
	# it: the operator would keep worker-next for them. The rest of the
	# test runs this tree: from the release, its worker beside the
	# release's until the fleet and the inboxes are on it.
	if [ "$rbuild" != "$(bin/octflow version | sed -n 's/^build ID //p')" ]; then
		OCTFLOW_NEXT_IMAGE=octflow-test/octflow:dev compose up -d --no-deps --wait --wait-timeout 300 worker-next >>"$CACHE/logs/up.log" 2>&1 ||
			logs_and_fail "this tree's worker beside $release's"
		out=$(compose run --rm --no-deps -T worker-deployment deployment promote 2>&1) ||
			logs_and_fail "this tree's promote of its build after the drill: $out"
		grep -q "the fleet and the inboxes run on build" <<<"$out" || moved worker-deployment "$(bin/octflow version | sed -n 's/^build ID //p')"
	fi
	compose rm -sf worker-next >/dev/null 2>&1
	step "PASS: rolled back: new exams run $release again (upgrade drill $(($(date +%s) - T_UPGRADE)) s)"

	down=$(promql 'ALERTS{alertname="OctflowNodeDown", alertstate="firing"}')
	[ "$(jq length <<<"$down")" = 0 ] || logs_and_fail "OctflowNodeDown firing after the GPU nodes came back: $down"
	step "PASS: no OctflowNodeDown firing"

	# down, then up with the volumes kept: every exam and report still
	# there; the stack on this tree's image again, its build promoted.
	step "docker compose down (volumes kept), then up --wait"
	compose down >/dev/null 2>&1 || logs_and_fail "docker compose down"
	compose up -d --wait --wait-timeout 300 >>"$CACHE/logs/up.log" 2>&1 ||
		logs_and_fail "the stack did not come back up healthy"
	API=https://$(compose port api 8080)
	PROM=http://$(compose port prometheus 9090)
	SINK=http://$(compose port alert-sink 8080)
	out=$(compose run --rm --no-deps -T worker-deployment deployment promote 2>&1) ||
		logs_and_fail "this tree's promote of its build after the drill: $out"
	check "${all[@]}"
	step "PASS: after down and up, all ${#all[@]} exams COMPLETED with their reports"
else
	alert_received
fi

# --- backup and restore ----------------------------------------------------
# As an operator would (docs/operations.md, *Backup and restore*): review
# decisions recorded, exams in flight, deploy/backup.sh; then every volume
# of the stack destroyed and the host's deploy/secrets, .env and compose
# overlay lost; deploy/restore.sh. Then every exam that had completed is back as it
# was (status, report, timeline, review; its review still closed to a
# second decision), its report object's ETag and the secrets as they were,
# every audit entry of the collector's file back, and the exams that were
# in flight complete, each with one report, its report stage run once and
# no second run (OCTFLOW_COMPOSE_BACKUP=0 skips it).
if [ "${OCTFLOW_COMPOSE_BACKUP:-1}" = 1 ]; then
	T_PHASE=$(date +%s)
	clin() { curl -fsS -m 10 -H "Authorization: Bearer $CLINICIAN" "$@"; }
	review() { # ID DECISION: the HTTP status of the decision
		curl -sS -m 10 -o "$scans/review.json" -w '%{http_code}' -H "Authorization: Bearer $CLINICIAN" -H 'Content-Type: application/json' \
			--data "{\"decision\": \"$2\", \"note\": \"compose-test: before the backup\"}" "$API/v1/exams/$1/review"
	}
	# snapshot ID...: a line per exam: its status (state, review, runs,
	# report), its report's and its timeline's digests. The urgent exam's
	# timeline is left out: its review reminds, so it grows.
	snapshot() {
		local id ev
		for id in "$@"; do
			ev=-
			[ "$id" = "$urgent" ] || ev=$(clin "$API/v1/exams/$id/events" | sha256sum | cut -c1-16) || ev=unreadable
			printf '%s %s report=%s events=%s\n' "$id" "$(status "$id" | jq -c '{state, review, runs, report}')" \
				"$(clin "$API/v1/exams/$id/report?format=json" | sha256sum | cut -c1-16)" "$ev"
		done
	}
	# etag KEY: the ETag S3 gives an object, read with the api's account.
	etag() {
		compose exec -T api sh -c 'curl -sS -m 10 -I --cacert /run/secrets/ca.pem --aws-sigv4 "aws:amz:us-east-1:s3" \
			--user "$(cat /run/secrets/api-s3-access-key):$(cat /run/secrets/api-s3-secret-key)" \
			-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "https://s3:7070/octflow/$1"' sh "$1" | tr -d '\r' | awk 'tolower($1) == "etag:" { print $2 }'
	}
	trail_seqs() { compose exec -T audit cat /var/log/audit/audit.log | grep -o 'IHE+RFC-3881 \[meta sequenceId="[0-9]*"\]' | sort -u; }
	secrets_list() { (cd "$RUN/deploy/secrets" && find . -type f -printf '%p %U:%G %m ' -exec sha256sum {} \; | sort); }

	for want in "${all[0]} approve 200" "${all[1]} reject 200" "${all[0]} approve 409"; do
		read -r id decision code <<<"$want"
		got=$(review "$id" "$decision") || true
		[ "$got" = "$code" ] || logs_and_fail "review $decision of $id answered $got, want $code: $(cat "$scans/review.json")"
	done
	completed=("${all[@]}")
	snapshot "${completed[@]}" >"$scans/before.txt"
	# (With the outages, the upgrade drill approved one exam of its own.)
	grep -q "^${all[0]} .*\"review\":\"approved\"" "$scans/before.txt" && grep -q "^${all[1]} .*\"review\":\"rejected\"" "$scans/before.txt" &&
		[ "$(grep -c '"review":"rejected"' "$scans/before.txt")" = 1 ] ||
		logs_and_fail "the reviews are not in the exams' status: $(grep -v '"review":"pending"' "$scans/before.txt")"
	key=$(status "${all[0]}" | jq -r .report.jsonKey)
	tag=$(etag "$key")
	[ -n "$tag" ] || logs_and_fail "no ETag for $key"
	# The review decisions' audit entries, in the collector's file.
	deadline=$(($(date +%s) + 60))
	until [ "$(compose exec -T audit cat /var/log/audit/audit.log | grep -c 'POST /v1/exams/:examId/review')" -ge 3 ]; do
		[ "$(date +%s)" -lt "$deadline" ] || logs_and_fail "the review decisions' audit entries did not reach the collector within 60 s"
		sleep 2
	done
	trail_seqs >"$scans/trail-before.txt"
	secrets_list >"$scans/secrets-before.txt"
	# Exams in flight: one in a GPU stage, the others behind it.
	submit 4
	inflight=("${batch[@]}")
	hit=$(gpu_stage "${inflight[@]}") || exit 1
	# The GPU nodes are held (paused) from here to the disaster, so that
	# the exams stay in flight however long the backup takes: on a loaded
	# 2-core machine it once took 26 s, and all four exams, which pass a
	# stage in a second or two, had reached their report stage before
	# PostgreSQL was copied. What they were running is retried on the
	# restored stack, as after a node lost.
	gpus=$(compose ps --services --status running | grep '^gpu-' | tr '\n' ' ')
	[ -n "$gpus" ] || logs_and_fail "no GPU node running at the backup"
	# shellcheck disable=SC2086 # one service a word
	compose pause $gpus >/dev/null 2>&1 || logs_and_fail "docker compose pause $gpus"
	running=$(for id in "${inflight[@]}"; do status "$id" | jq -r 'select(.state != "COMPLETED") | .examId'; done | wc -l)
	[ "$running" -ge 1 ] || logs_and_fail "no exam in flight at the backup"
	step "backup: $(wc -l <"$scans/before.txt") exams completed (two reviewed), $running of ${#inflight[@]} in flight ($hit; GPU nodes $gpus held), $(wc -l <"$scans/trail-before.txt") audit entries"
	T_BACKUP=$(date +%s)
	backup() { (cd "$RUN" && OCTFLOW_COMPOSE=$COMPOSE_BIN COMPOSE_PROJECT_NAME=$PROJECT COMPOSE_FILE=docker-compose.yml:compose.test.yml "$@"); }
	archive=$(backup deploy/backup.sh --keep 1 2>"$CACHE/logs/backup.log") || {
		tail -20 "$CACHE/logs/backup.log"
		logs_and_fail "deploy/backup.sh"
	}
	[ -s "$archive" ] && [ "$(stat -c %a "$archive")" = 600 ] || logs_and_fail "the backup is not a file of mode 0600: $(ls -l "$archive")"
	T_BACKUP=$(($(date +%s) - T_BACKUP))
	sed 's/^/    /' "$CACHE/logs/backup.log"
	step "PASS: deploy/backup.sh took $(basename "$archive") ($(($(stat -c %s "$archive") / 1024)) KiB) in $T_BACKUP s with exams in flight"

	# The disaster: every volume of the stack, the secrets, .env and the overlay gone.
	T_DOWN=$(date +%s)
	# shellcheck disable=SC2086
	compose unpause $gpus >/dev/null 2>&1 || logs_and_fail "docker compose unpause $gpus"
	compose down -v --remove-orphans >/dev/null 2>&1 || logs_and_fail "docker compose down -v"
	left=$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT" | tr '\n' ' ')
	[ -z "$left" ] || logs_and_fail "volumes left after down -v: $left"
	cp "$RUN/.env" "$scans/env-before"
	rm -rf "$RUN/deploy/secrets" "$RUN/docker-compose.override.yml" "$RUN/.env"
	T_DOWN=$(($(date +%s) - T_DOWN))
	step "docker compose down -v: every volume of the stack destroyed; deploy/secrets, .env and docker-compose.override.yml removed"

	T_RESTORE=$(date +%s)
	T_RESTORE_AT=$T_RESTORE
	OCTFLOW_WAIT_TIMEOUT=300 timeout 900 bash -c 'cd "$1" && OCTFLOW_COMPOSE=$2 COMPOSE_PROJECT_NAME=$3 COMPOSE_FILE=docker-compose.yml:compose.test.yml deploy/restore.sh "$4"' \
		sh "$RUN" "$COMPOSE_BIN" "$PROJECT" "$archive" >"$CACHE/logs/restore.log" 2>&1 || {
		grep -v '^ Container' "$CACHE/logs/restore.log" | tail -20
		logs_and_fail "deploy/restore.sh"
	}
	T_RESTORE=$(($(date +%s) - T_RESTORE))
	grep '^restore ' "$CACHE/logs/restore.log" | sed 's/^/    /'
	! grep -i 'already exists but was not created' "$CACHE/logs/restore.log" || logs_and_fail "Compose did not take the restored volumes for the stack's own"
	API=https://$(compose port api 8080)
	curl -fsS -m 10 "$API/readyz" >/dev/null || logs_and_fail "the api at $API is not ready after the restore"
	step "PASS: deploy/restore.sh brought the stack back up in $T_RESTORE s"

	T_CHECK=$(date +%s)
	[ -e "$RUN/docker-compose.override.yml" ] || logs_and_fail "docker-compose.override.yml was not restored"
	diff "$scans/env-before" "$RUN/.env" || logs_and_fail ".env differs after the restore (above)"
	secrets_list | diff "$scans/secrets-before.txt" - || logs_and_fail "deploy/secrets differs after the restore (above: contents, owners, modes)"
	snapshot "${completed[@]}" | diff "$scans/before.txt" - || logs_and_fail "exams completed before the backup differ after the restore (above)"
	got=$(review "${all[0]}" approve) || true
	[ "$got" = 409 ] || logs_and_fail "a second approval of ${all[0]} after the restore answered $got, want 409 (the review's state was not restored)"
	[ "$(etag "$key")" = "$tag" ] || logs_and_fail "the ETag of $key was $tag, after the restore '$(etag "$key")'"
	lost=$(trail_seqs | comm -23 "$scans/trail-before.txt" - | wc -l)
	[ "$lost" = 0 ] || logs_and_fail "$lost audit entries of the collector's file are missing after the restore"
	step "PASS: after the restore, ${#completed[@]} completed exams as they were (status, report, timeline, reviews), the ETag of $key, deploy/secrets, .env and the overlay, all $(wc -l <"$scans/trail-before.txt") audit entries"
	check "${inflight[@]}"
	# ...and the backup caught them in flight: their report stage ran on
	# the restored stack (the old stack's later moves went with it).
	after=0
	for id in "${inflight[@]}"; do
		runs=$(status "$id" | jq -r .runs)
		[ "$runs" = 1 ] || logs_and_fail "exam $id has $runs runs after the restore, want 1"
		at=$(clin "$API/v1/exams/$id/events" | jq -r '[.[] | select(.stage == "report" and .to == "EXECUTING") | .at | sub("\\.[0-9]+"; "") | fromdateiso8601] | .[0]') ||
			logs_and_fail "exam $id: no time for its report stage in its timeline"
		[ "$at" -lt "$T_RESTORE_AT" ] || after=$((after + 1))
	done
	[ "$after" -ge 1 ] || logs_and_fail "no exam ran its report stage after the restore began: the backup caught none in flight"
	step "PASS: the ${#inflight[@]} exams in flight at the backup COMPLETED after the restore, one report each, one run ($after ran their report stage on the restored stack)"
	T_CHECK=$(($(date +%s) - T_CHECK))
	step "backup and restore phase: $(($(date +%s) - T_PHASE)) s (backup $T_BACKUP s, down -v $T_DOWN s, restore and up $T_RESTORE s, checks $T_CHECK s)"
fi
