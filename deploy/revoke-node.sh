#!/bin/sh
# deploy/revoke-node.sh NODE_ID [SECRETS_DIR]: take a GPU node on another
# host out of the stack without replacing the CA (docs/security.md, Trust
# by role). On the stack's host:
#
#   - its certificate's serial number (from its bundle's node.pem) is
#     added to SECRETS_DIR/revoked-certificates, which the stack's
#     Temporal server reads again as it changes: the certificate keeps
#     passing TLS, but names no role, so it may call nothing;
#   - its S3 account's line leaves SECRETS_DIR/s3-node-accounts; then
#     `docker compose up -d --force-recreate s3 s3-setup` ends its S3
#     access.
#
# Its bundle (SECRETS_DIR/nodes/NODE_ID) is kept, for the record: delete
# it when it is no longer needed.
set -eu
NODE=${1:?usage: deploy/revoke-node.sh NODE_ID [SECRETS_DIR]}
S=${2:-$(dirname "$0")/secrets}
B=$S/nodes/$NODE
[ -s "$B/node.pem" ] || { echo "revoke-node: $B/node.pem missing: no bundle of $NODE here" >&2 && exit 1; }
serial=$(openssl x509 -in "$B/node.pem" -noout -serial | sed 's/^serial=//')
[ -n "$serial" ] || { echo "revoke-node: no serial number in $B/node.pem" >&2 && exit 1; }
# Appended in place: the server sees the file it has mounted change.
printf '%s # %s, revoked %s\n' "$serial" "$NODE" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$S/revoked-certificates"
if [ -e "$S/s3-node-accounts" ]; then
	chmod u+w "$S/s3-node-accounts"
	awk -v n="$NODE" '$1 != n' "$S/s3-node-accounts" >"$S/s3-node-accounts.tmp"
	cat "$S/s3-node-accounts.tmp" >"$S/s3-node-accounts"
	rm -f "$S/s3-node-accounts.tmp"
	chmod 444 "$S/s3-node-accounts"
fi
echo "revoked $NODE (certificate serial $serial); now: docker compose up -d --force-recreate s3 s3-setup"
