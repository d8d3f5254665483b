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
#   s3-access-key, s3-secret-key
#                           the S3 service's root account (s3), which
#                           octflow uses too: DEPLOY_DIR/octflow.env, read
#                           by octflow's services only, carries the same
#                           pair as OCTFLOW_S3_ACCESS_KEY/_SECRET_KEY
#   grafana-admin-password  Grafana's admin (grafana)
#   codec-keys.json         the payload codec's keys (octflow's services)
#   pseudonym.key           the pseudonym key (api)
#
# What it cannot make: tokens.json (the api's callers, docs/security.md),
# alertmanager.yml (your receivers, deploy/alertmanager/) and the
# certificates (deploy/make-certs.sh). Files that exist are kept. The
# directory is made 0700 (root's, when run as root): the files in it are
# 0444, so that each image's own non-root user reads its mounted copy,
# and no one else on the host reaches them.
set -eu
DEPLOY=${1:-$(dirname "$0")}
S=$DEPLOY/secrets
mkdir -p "$S"
chmod 700 "$S"
rnd() { openssl rand -hex "$1"; }
made=
secret() { # NAME VALUE
	[ -s "$S/$1" ] && return 0
	printf '%s\n' "$2" >"$S/$1.tmp"
	chmod 444 "$S/$1.tmp"
	mv "$S/$1.tmp" "$S/$1"
	made="$made $1"
}
secret postgres-password "$(rnd 24)"
secret temporal-db-password "$(rnd 24)"
secret s3-access-key "$(rnd 10)"
secret s3-secret-key "$(rnd 24)"
secret grafana-admin-password "$(rnd 16)"
secret pseudonym.key "$(rnd 32)"
secret codec-keys.json "{\"active\": \"k1\", \"keys\": {\"k1\": \"$(openssl rand -base64 32)\"}}"
if [ ! -s "$DEPLOY/octflow.env" ]; then
	umask 077
	printf '# octflow'"'"'s S3 credentials (deploy/make-secrets.sh): the S3 root account of\n# deploy/secrets/s3-access-key and s3-secret-key; a site with its own S3 puts a scoped account here.\nOCTFLOW_S3_ACCESS_KEY=%s\nOCTFLOW_S3_SECRET_KEY=%s\n' \
		"$(cat "$S/s3-access-key")" "$(cat "$S/s3-secret-key")" >"$DEPLOY/octflow.env"
	made="$made octflow.env"
fi
echo "made:${made:- nothing (every secret exists)}"
