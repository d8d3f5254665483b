#!/bin/sh
# deploy/make-certs.sh [DIR]: every certificate the compose stack needs,
# made on this host with openssl into DIR (default deploy/secrets, which
# git ignores and .dockerignore keeps out of every build context):
#
#   ca.pem, ca-key.pem   the stack's own CA. ca.pem is what clients trust
#                        (devices, routers, OCTFLOW_API_CA_FILE); keep
#                        ca-key.pem offline once the certificates are made:
#                        no container mounts it.
#   api.pem, api-key.pem the api's HTTPS certificate, for the names in
#                        OCTFLOW_API_HOSTS (space-separated DNS names or IP
#                        addresses, default: this host's name) plus api,
#                        localhost and 127.0.0.1 (its own healthcheck).
#   temporal.pem, temporal-key.pem
#                        the Temporal server's certificate, for its frontend
#                        and between its own services (name temporal; it
#                        also presents it as their client; role
#                        temporal-server).
#   temporal-api.pem, temporal-worker.pem, temporal-gpu.pem,
#   temporal-operator.pem (and their -key.pem)
#                        the client certificates for Temporal of the api,
#                        the worker, this host's GPU services and the
#                        namespace job: each names its role in its OU
#                        (octflow-api, octflow-worker, octflow-gpu-node,
#                        octflow-operator), from which the stack's Temporal
#                        server (cmd/octflow-temporal) decides what it may
#                        call (docs/security.md, Trust by role).
#   temporal-ui.pem, temporal-ui-key.pem
#                        the Web UI's client certificate for Temporal (role
#                        temporal-ui: it reads).
#   metrics.pem, metrics-key.pem
#                        the metrics listeners' certificate (name
#                        octflow-metrics), which Prometheus checks on every
#                        scrape: one for all the targets it scrapes over
#                        TLS but Temporal (which presents temporal.pem),
#                        with their names as Prometheus asks for them (api,
#                        worker, gpuworker: the name every GPU node of the
#                        stack answers to; node-exporter, postgres-exporter,
#                        alertmanager; localhost and 127.0.0.1 for their
#                        healthchecks).
#   s3.pem, s3-key.pem   the S3 service's HTTPS certificate (name s3).
#   s3-proxy.pem, s3-proxy-key.pem
#                        the TLS proxy that publishes S3 to GPU nodes on
#                        other hosts (name s3-proxy, which their tunnel
#                        checks, plus the names in OCTFLOW_API_HOSTS).
#   audit.pem, audit-key.pem
#                        the audit collector's certificate (name audit),
#                        where the api sends its audit trail by RELP over
#                        TLS.
#   audit-client.pem, audit-client-key.pem
#                        the api's own audit certificate (name
#                        octflow-api-audit), the only one the collector
#                        takes: no other service can write the trail.
#   postgresql.pem, postgresql-key.pem
#                        PostgreSQL's certificate (name postgresql), which
#                        it serves TLS with, the only way it takes a
#                        connection over the network; Temporal, its schema
#                        job, postgres-roles and postgres-exporter check it
#                        against ca.pem and the name (verify-full).
#
# A GPU node on another host gets its own client certificate from
# deploy/make-node.sh, which signs it with ca-key.pem.
#
# Run as root, each key is made readable by the user of the image that
# uses it and no one else (octflow: uid 10001; Temporal's server and UI:
# uid 1000; PostgreSQL: uid 999; S3, its proxy and the collector run as
# root), the metrics key by octflow's user and the group of the
# Prometheus images' (nobody, gid 65534: Alertmanager and the
# exporters); otherwise mode 0644, for a host where that is acceptable
# (docs/operations.md), but for PostgreSQL, which refuses a key that is
# not its own user's with mode 0600 or less (or root's, 0640 or less):
# run as another user, the script says what to run as root for it.
# Files that exist are kept, so a
# second run makes only what is missing; delete one (the certificate and
# its key) to renew it, with ca-key.pem back in DIR for the run: without
# it the script makes nothing and says so (docs/operations.md, Alerts:
# certificates).
set -eu
DIR=${1:-$(dirname "$0")/secrets}
DAYS=${OCTFLOW_CERT_DAYS:-825}
# Each certificate lives a week less than the one before (leaf, below):
# the last of the thirteen must still live past the 30 days at which
# OctflowCertificateExpiring fires: 12 weeks and 5 weeks more.
[ "$DAYS" -ge 119 ] || { echo "make-certs: OCTFLOW_CERT_DAYS $DAYS: want 119 or more (the certificates expire a week apart)" >&2; exit 1; }
HOSTS=${OCTFLOW_API_HOSTS:-$(hostname -f 2>/dev/null || hostname)}
umask 077
mkdir -p "$DIR"
chmod 700 "$DIR"
cd "$DIR"

# The CA only where there is none: once its key is offline, a certificate
# to make or renew needs the key brought back (below), never a new CA,
# which would leave every certificate of the old one untrusted.
if [ ! -s ca.pem ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$((DAYS * 2))" \
		-subj "/CN=octflow stack CA" -keyout ca-key.pem -out ca.pem \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	chmod 600 ca-key.pem
	chmod 644 ca.pem
	echo "made ca.pem (keep ca-key.pem offline)"
fi

# leaf NAME CN SANS USAGE UID[:GID] [ROLE]: NAME.pem and NAME-key.pem,
# signed by the CA, for USAGE (serverAuth, clientAuth or both), the key
# for uid UID (and group GID, when given); ROLE, when given, is the
# subject's OU (a role in Temporal). Each
# certificate made here lives a week less than the one made before it
# (OCTFLOW_CERT_DAYS for the first), so they come up for renewal one at
# a time, not all on one day (OctflowCertificateExpiring).
made=0
leaf() {
	[ -s "$1.pem" ] && [ -s "$1-key.pem" ] && return 0
	[ -s ca-key.pem ] || {
		echo "make-certs: $1.pem is to be made, and ca-key.pem is not in $DIR (kept offline?): put it back for this run, then take it offline again" >&2
		exit 1
	}
	days=$((DAYS - 7 * made))
	made=$((made + 1))
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "${6:+/OU=$6}/CN=$2" \
		-keyout "$1-key.pem" -out "$1.csr" 2>/dev/null
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\n' "$4" >"$1.ext"
	[ -z "$3" ] || printf 'subjectAltName=%s\n' "$3" >>"$1.ext"
	openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" \
		-extfile "$1.ext" -out "$1.pem" 2>/dev/null
	rm -f "$1.csr" "$1.ext" ca.srl
	chmod 644 "$1.pem"
	if [ "$(id -u)" = 0 ]; then
		chown "$5" "$1-key.pem"
		case "$5" in
		*:*) chmod 440 "$1-key.pem" ;;
		*) chmod 400 "$1-key.pem" ;;
		esac
	else
		chmod 644 "$1-key.pem"
	fi
	echo "made $1.pem ($2${3:+; $3}; $days days)"
}

sans=
for h in $HOSTS api localhost 127.0.0.1; do
	case "$h" in
	*[!0-9.]* | "") sans="$sans${sans:+,}DNS:$h" ;;
	*) sans="$sans${sans:+,}IP:$h" ;;
	esac
done
leaf api "$(echo "$HOSTS" | cut -d' ' -f1)" "$sans" serverAuth 10001
leaf temporal temporal DNS:temporal,DNS:localhost,IP:127.0.0.1 serverAuth,clientAuth 1000 temporal-server
leaf temporal-api octflow-api "" clientAuth 10001 octflow-api
leaf temporal-worker octflow-worker "" clientAuth 10001 octflow-worker
leaf temporal-gpu octflow-gpu "" clientAuth 10001 octflow-gpu-node
leaf temporal-operator octflow-operator "" clientAuth 10001 octflow-operator
leaf temporal-ui temporal-ui "" clientAuth 1000 temporal-ui
leaf metrics octflow-metrics DNS:api,DNS:worker,DNS:gpuworker,DNS:node-exporter,DNS:postgres-exporter,DNS:alertmanager,DNS:localhost,IP:127.0.0.1 serverAuth 10001:65534
leaf s3 s3 DNS:s3,DNS:localhost,IP:127.0.0.1 serverAuth 0
leaf s3-proxy s3-proxy "DNS:s3-proxy,$sans" serverAuth 10001
leaf audit audit DNS:audit,DNS:localhost,IP:127.0.0.1 serverAuth 10001
leaf audit-client octflow-api-audit DNS:octflow-api-audit clientAuth 10001
pg_made=$made
leaf postgresql postgresql DNS:postgresql,DNS:localhost,IP:127.0.0.1 serverAuth 999
if [ "$made" != "$pg_made" ] && [ "$(id -u)" != 0 ]; then
	echo "make-certs: PostgreSQL takes postgresql-key.pem only as its own user's (uid 999) with mode 0400: as root, chown 999 $DIR/postgresql-key.pem && chmod 400 $DIR/postgresql-key.pem" >&2
fi
