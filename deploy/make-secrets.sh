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
secret octflow-s3-access-key "$(rnd 10)"
secret octflow-s3-secret-key "$(rnd 24)"
secret api-s3-access-key "$(rnd 10)"
secret api-s3-secret-key "$(rnd 24)"
secret gpu-s3-access-key "$(rnd 10)"
secret gpu-s3-secret-key "$(rnd 24)"
secret grafana-admin-password "$(rnd 16)"
secret pseudonym.key "$(rnd 32)"
secret codec-keys.json "{\"active\": \"k1\", \"keys\": {\"k1\": \"$(openssl rand -base64 32)\"}}"
secret identity-keys.json "{\"active\": \"i1\", \"keys\": {\"i1\": \"$(openssl rand -base64 32)\"}}"
if [ ! -e "$S/s3-node-accounts" ]; then
	printf '# NODE ACCESS_KEY SECRET_KEY, one GPU node on another host a line (deploy/make-node.sh)\n' >"$S/s3-node-accounts"
	chmod 444 "$S/s3-node-accounts"
	made="$made s3-node-accounts"
fi
if [ ! -e "$S/revoked-certificates" ]; then
	printf '# serial numbers of revoked client certificates, one a line (deploy/revoke-node.sh)
' >"$S/revoked-certificates"
	chmod 444 "$S/revoked-certificates"
	made="$made revoked-certificates"
fi
echo "made:${made:- nothing (every secret exists)}"
