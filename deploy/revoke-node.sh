#!/bin/sh
# deploy/revoke-node.sh NODE_ID [SECRETS_DIR] [CERT]: take a GPU node on
# another host out of the stack without replacing the CA (docs/security.md,
# Trust by role). On the stack's host:
#
#   - its certificate's serial number (from CERT: its node.pem, or the
#     serial in hex as CA_DIR/issued-node-certificates lists it; default
#     the bundle's node.pem, where this host signed it; a node renewed
#     has several: revoke each that has not expired) is
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
NODE=${1:?usage: deploy/revoke-node.sh NODE_ID [SECRETS_DIR] [CERT]}
S=${2:-$(dirname "$0")/secrets}
B=$S/nodes/$NODE
CERT=${3:-$B/node.pem}
if [ -s "$CERT" ]; then
	serial=$(openssl x509 -in "$CERT" -noout -serial | sed 's/^serial=//')
	cn=$(openssl x509 -in "$CERT" -noout -subject -nameopt sep_multiline,sname | sed -n 's/^ *CN=//p')
	[ "$cn" = "$NODE" ] || { echo "revoke-node: $CERT is the certificate of $cn, not $NODE" >&2 && exit 1; }
else
	case "$CERT" in
	*[!0-9A-Fa-f]* | "") echo "revoke-node: $CERT missing: give the node's certificate, or its serial number in hex" >&2 && exit 1 ;;
	esac
	serial=$CERT
fi
case "$serial" in
*[!0]*) ;;
*) echo "revoke-node: serial $serial names no certificate" >&2 && exit 1 ;;
esac
[ -n "$serial" ] || { echo "revoke-node: no serial number in $CERT" >&2 && exit 1; }
# Appended in place: the server sees the file it has mounted change.
revoked_mode=$(stat -c %a "$S/revoked-certificates")
chmod u+w "$S/revoked-certificates"
printf '%s # %s, revoked %s\n' "$serial" "$NODE" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$S/revoked-certificates"
chmod "$revoked_mode" "$S/revoked-certificates"
if [ -e "$S/s3-node-accounts" ]; then
	mode=$(stat -c %a "$S/s3-node-accounts")
	chmod u+w "$S/s3-node-accounts"
	awk -v n="$NODE" '$1 != n' "$S/s3-node-accounts" >"$S/s3-node-accounts.tmp"
	cat "$S/s3-node-accounts.tmp" >"$S/s3-node-accounts"
	rm -f "$S/s3-node-accounts.tmp"
	chmod "$mode" "$S/s3-node-accounts" # its owner and mode as deploy/make-secrets.sh left them
fi
echo "revoked $NODE (certificate serial $serial); now: docker compose up -d --force-recreate s3 s3-setup"
