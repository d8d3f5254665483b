#!/bin/sh
# deploy/make-node.sh NODE_ID [SECRETS_DIR]: on the stack's host, after
# deploy/make-secrets.sh and deploy/make-certs.sh, what a GPU node on
# another host needs from the stack to join it (docs/operations.md, *A
# GPU node on another host*), into SECRETS_DIR/nodes/NODE_ID (default
# deploy/secrets/nodes/NODE_ID), the node's bundle:
#
#   ca.pem                 the stack's CA, which the node checks Temporal's
#                          and the S3 proxy's certificates against
#   s3-access-key, s3-secret-key
#                          the node's own S3 account: it reads exams' scans
#                          and stage outputs and writes stage outputs,
#                          never an identity, a report or a record, and
#                          never deletes
#   codec-keys.json        the payload keys a node opens the stages it runs
#                          with: every campus's (the stack's payload keys),
#                          or, with OCTFLOW_NODE_CAMPUS=<campus>, that
#                          campus's and the fleet's only (octflow node-keys,
#                          run from OCTFLOW_BIN, octflow on the PATH, or
#                          the stack's octflow image)
#
# and appends the account to SECRETS_DIR/s3-node-accounts, which the S3
# service reads at its start. The node's certificate comes by request:
# its key is made on the node's host and never travels
# (deploy/node-request.sh there), and the request is signed where the
# CA's key is kept (deploy/sign-node.sh, with the same
# OCTFLOW_NODE_CAMPUS), which need not be this host. Where this host does
# hold SECRETS_DIR/ca-key.pem, this script makes the key and signs it
# here, into the bundle, as a shortcut.
#
# Then, on the stack's host:
#
#   docker compose up -d --force-recreate s3 s3-setup
#
# and copy the bundle to the node's host (scp -r, then delete it here).
# To take a node's access away: deploy/revoke-node.sh NODE_ID (its
# certificate then names no role in Temporal, and its S3 account goes),
# then recreate s3 and s3-setup as above. Keep bundles secret: they
# hold the node's S3 account and payload keys.
set -eu
NODE=${1:?usage: deploy/make-node.sh NODE_ID [SECRETS_DIR]}
S=${2:-$(dirname "$0")/secrets}
CAMPUS=${OCTFLOW_NODE_CAMPUS:-}
case "$NODE" in
*[!a-z0-9-]* | -*) echo "make-node: node ID $NODE: lower-case letters, digits and - only" >&2 && exit 2 ;;
# The stack's own certificate names: a node's certificate must not pass
# for the api's audit client, the server or another service.
octflow-* | temporal* | audit* | api | s3* | localhost) echo "make-node: node ID $NODE is a name the stack's own certificates use" >&2 && exit 2 ;;
esac
case "$CAMPUS" in
*[!a-z0-9-]* | -*) echo "make-node: campus $CAMPUS: lower-case letters, digits and - only" >&2 && exit 2 ;;
esac
for f in ca.pem codec-keys.json s3-node-accounts; do
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
cp "$S/ca.pem" "$B/"
if [ -z "$CAMPUS" ]; then
	cp "$S/codec-keys.json" "$B/"
else
	# That campus's keys and the fleet's, derived from the payload keys.
	if [ -n "${OCTFLOW_BIN:-}" ]; then
		set -- "$OCTFLOW_BIN"
	elif command -v octflow >/dev/null 2>&1; then
		set -- octflow
	else
		image=$(sed -n 's/^ *image: *\(octflow:[^ ]*\) *$/\1/p' "$(dirname "$0")/../docker-compose.yml" | head -1)
		set -- docker run --rm -i --network none "${image:?make-node: no octflow image named in docker-compose.yml}"
	fi
	"$@" node-keys --campus "$CAMPUS" <"$S/codec-keys.json" >"$B/codec-keys.json.new" ||
		{ rm -f "$B/codec-keys.json.new" && echo "make-node: octflow node-keys failed" >&2 && exit 1; }
	mv "$B/codec-keys.json.new" "$B/codec-keys.json"
fi
access=$(openssl rand -hex 10)
secret=$(openssl rand -hex 24)
printf '%s\n' "$access" >"$B/s3-access-key"
printf '%s\n' "$secret" >"$B/s3-secret-key"
cert="next: on the node's host, deploy/node-request.sh $NODE; where the CA key is, ${CAMPUS:+OCTFLOW_NODE_CAMPUS=$CAMPUS }deploy/sign-node.sh $NODE node.csr CA_DIR; the bundle's files and node.pem go beside the node's key"
if [ -s "$S/ca-key.pem" ]; then
	"$(dirname "$0")/node-request.sh" "$NODE" "$B" >/dev/null
	OCTFLOW_NODE_CAMPUS=$CAMPUS "$(dirname "$0")/sign-node.sh" "$NODE" "$B/node.csr" "$S" >/dev/null
	rm -f "$B/node.csr"
	cert="node.pem: CN=$NODE${CAMPUS:+, campus $CAMPUS}, signed here"
fi
# On the node, octflow (uid 10001) and the tunnel read these; the
# bundle's directory keeps everyone else out.
chmod 444 "$B"/*
mode=$(stat -c %a "$S/s3-node-accounts")
chmod u+w "$S/s3-node-accounts"
printf '%s %s %s\n' "$NODE" "$access" "$secret" >>"$S/s3-node-accounts"
chmod "$mode" "$S/s3-node-accounts" # its owner and mode as deploy/make-secrets.sh left them
echo "made $B (S3 account $access; $cert); now: docker compose up -d --force-recreate s3 s3-setup"
