#!/bin/sh
# deploy/make-node.sh NODE_ID [SECRETS_DIR]: what a GPU node on another
# host needs to join the stack (docs/operations.md, *A GPU node on another
# host*), made on the stack's host after deploy/make-secrets.sh and
# deploy/make-certs.sh, into SECRETS_DIR/nodes/NODE_ID (default
# deploy/secrets/nodes/NODE_ID), the node's bundle:
#
#   ca.pem                 the stack's CA, which the node checks Temporal's
#                          and the S3 proxy's certificates against
#   node.pem, node-key.pem the node's client certificate (CN=NODE_ID, OU
#                          octflow-gpu-node: in Temporal it may poll and
#                          complete activity tasks and report to the fleet,
#                          nothing else), signed by the stack's CA:
#                          Temporal's frontend and the S3 proxy take no
#                          client without one
#   s3-access-key, s3-secret-key
#                          the node's own S3 account, which may read, write
#                          and list the bucket's objects and nothing else
#   codec-keys.json        the payload codec's keys (a node opens the
#                          exam payloads it works on)
#
# and appends the account to SECRETS_DIR/s3-node-accounts, which the S3
# service reads at its start. Then, on the stack's host:
#
#   docker compose up -d --force-recreate s3 s3-setup
#
# and copy the bundle to the node's host (scp -r, then delete it here).
# To take a node's access away: deploy/revoke-node.sh NODE_ID (its
# certificate then names no role in Temporal, and its S3 account goes),
# then recreate s3 and s3-setup as above. The certificate lasts
# OCTFLOW_NODE_CERT_DAYS (default 90): renew it before with
# deploy/revoke-node.sh and this script again. Keep bundles as secret as
# the CA's key.
set -eu
NODE=${1:?usage: deploy/make-node.sh NODE_ID [SECRETS_DIR]}
S=${2:-$(dirname "$0")/secrets}
case "$NODE" in
*[!a-z0-9-]* | -*) echo "make-node: node ID $NODE: lower-case letters, digits and - only" >&2 && exit 2 ;;
# The stack's own certificate names: a node's certificate must not pass
# for the api's audit client, the server or another service.
octflow-* | temporal* | audit* | api | s3* | localhost) echo "make-node: node ID $NODE is a name the stack's own certificates use" >&2 && exit 2 ;;
esac
for f in ca.pem ca-key.pem codec-keys.json s3-node-accounts; do
	[ -e "$S/$f" ] || { echo "make-node: $S/$f missing: run deploy/make-secrets.sh and deploy/make-certs.sh first" >&2 && exit 1; }
done
if awk -v n="$NODE" '$1 == n { found = 1 } END { exit !found }' "$S/s3-node-accounts"; then
	echo "make-node: $NODE has an S3 account already (s3-node-accounts); delete its line and its bundle to make it again" >&2
	exit 1
fi
B=$S/nodes/$NODE
mkdir -p "$B"
chmod 700 "$S/nodes" "$B"
umask 077
cp "$S/ca.pem" "$S/codec-keys.json" "$B/"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/OU=octflow-gpu-node/CN=$NODE" \
	-keyout "$B/node-key.pem" -out "$B/node.csr" 2>/dev/null
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$B/node.ext"
openssl x509 -req -in "$B/node.csr" -CA "$S/ca.pem" -CAkey "$S/ca-key.pem" -CAcreateserial -CAserial "$B/ca.srl" \
	-days "${OCTFLOW_NODE_CERT_DAYS:-90}" -extfile "$B/node.ext" -out "$B/node.pem" 2>/dev/null
rm -f "$B/node.csr" "$B/node.ext" "$B/ca.srl"
access=$(openssl rand -hex 10)
secret=$(openssl rand -hex 24)
printf '%s\n' "$access" >"$B/s3-access-key"
printf '%s\n' "$secret" >"$B/s3-secret-key"
# On the node, octflow (uid 10001) and the tunnel read these; the
# bundle's directory keeps everyone else out.
chmod 444 "$B"/*
chmod u+w "$S/s3-node-accounts"
printf '%s %s %s\n' "$NODE" "$access" "$secret" >>"$S/s3-node-accounts"
chmod 444 "$S/s3-node-accounts"
echo "made $B (node.pem: CN=$NODE; S3 account $access); now: docker compose up -d --force-recreate s3 s3-setup"
