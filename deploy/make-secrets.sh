#!/bin/sh
# deploy/make-secrets.sh [DEPLOY_DIR]: every generated secret the compose
# stack needs, one file per secret under DEPLOY_DIR/secrets (default
# deploy/secrets; git ignores it, .dockerignore keeps it out of every
# build context), each mounted only into the services that use it
# (docker-compose.yml's secrets:):
#
#   postgres-password       PostgreSQL's superuser, for the administrator
#                           (postgresql only)
#   temporal-db-password    Temporal's own database role (postgresql's
#                           first start, temporal-schema, temporal)
#   postgres-exporter-password
#                           postgres-exporter's database role (postgresql's
#                           first start, postgres-exporter)
#   s3-access-key, s3-secret-key
#                           the S3 service's root account (s3, s3-setup
#                           only)
#   octflow-s3-access-key, octflow-s3-secret-key
#                           octflow's own S3 account (s3 makes it, s3-setup
#                           grants it the bucket's objects; api, worker,
#                           GPU nodes: OCTFLOW_S3_ACCESS_KEY_FILE,
#                           _SECRET_KEY_FILE)
#   api-s3-access-key, api-s3-secret-key
#                           the api's S3 account (no deletes but its intake
#                           markers)
#   gpu-s3-access-key, gpu-s3-secret-key
#                           this host's GPU services' S3 account (an exam's
#                           scan and stage outputs only, no deletes)
#   revoked-certificates    serial numbers of revoked client certificates
#                           (deploy/revoke-node.sh), which Temporal refuses
#   s3-node-accounts        the S3 accounts of GPU nodes on other hosts,
#                           one a line (deploy/make-node.sh); made empty
#   grafana-admin-password  Grafana's admin (grafana)
#   codec-keys.json         the payload codec's keys (octflow's services)
#   identity-keys.json      the keys patients' identities are sealed under
#                           for the way back to the PACS (api, worker; never
#                           a GPU node)
#   pseudonym.key           the pseudonym key (api)
#
# What it cannot make: tokens.json (the api's callers, docs/security.md),
# alertmanager.yml (your receivers, deploy/alertmanager/) and the
# certificates (deploy/make-certs.sh). Files that exist are kept. The
# directory is made 0700 (root's, when run as root). Run as root, each
# file is readable by the users of the images that mount it and no one
# else (Compose without Swarm bind-mounts a secret with its host owner and
# mode): octflow's services, its S3 setup job and the remote-node
# accounts uid 10001; Temporal's server and schema job uid 1000, with
# PostgreSQL (uid and gid 999) through the group for the database
# password they share; postgres-exporter nobody (65534), with PostgreSQL
# through its group, for its role's; PostgreSQL's own password 999;
# Grafana 472; the S3
# service runs as root. Otherwise the files are 0444 in the 0700
# directory, for a host where that is acceptable (docs/operations.md).
set -eu
DEPLOY=${1:-$(dirname "$0")}
S=$DEPLOY/secrets
mkdir -p "$S"
chmod 700 "$S"
rnd() { openssl rand -hex "$1"; }
made=
# own NAME OWNER[:GROUP]: NAME readable by its services' users only (as
# root), or by all in the 0700 directory (otherwise).
own() {
	if [ "$(id -u)" = 0 ]; then
		chown "$2" "$S/$1"
		case "$2" in
		*:*) chmod 440 "$S/$1" ;;
		*) chmod 400 "$S/$1" ;;
		esac
	else
		chmod 444 "$S/$1"
	fi
}
secret() { # NAME OWNER[:GROUP] VALUE
	[ -s "$S/$1" ] && return 0
	printf '%s\n' "$3" >"$S/$1.tmp"
	mv "$S/$1.tmp" "$S/$1"
	own "$1" "$2"
	made="$made $1"
}
secret postgres-password 999 "$(rnd 24)"
secret temporal-db-password 1000:999 "$(rnd 24)"
secret postgres-exporter-password 65534:999 "$(rnd 24)"
secret s3-access-key 10001 "$(rnd 10)"
secret s3-secret-key 10001 "$(rnd 24)"
secret octflow-s3-access-key 10001 "$(rnd 10)"
secret octflow-s3-secret-key 10001 "$(rnd 24)"
secret api-s3-access-key 10001 "$(rnd 10)"
secret api-s3-secret-key 10001 "$(rnd 24)"
secret gpu-s3-access-key 10001 "$(rnd 10)"
secret gpu-s3-secret-key 10001 "$(rnd 24)"
secret grafana-admin-password 472 "$(rnd 16)"
secret pseudonym.key 10001 "$(rnd 32)"
secret codec-keys.json 10001 "{\"active\": \"k1\", \"keys\": {\"k1\": \"$(openssl rand -base64 32)\"}}"
secret identity-keys.json 10001 "{\"active\": \"i1\", \"keys\": {\"i1\": \"$(openssl rand -base64 32)\"}}"
secret s3-node-accounts 10001 '# NODE ACCESS_KEY SECRET_KEY, one GPU node on another host a line (deploy/make-node.sh)'
secret revoked-certificates 1000 '# serial numbers of revoked client certificates, one a line (deploy/revoke-node.sh)'
echo "made:${made:- nothing (every secret exists)}"
