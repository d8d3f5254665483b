#!/bin/sh
# deploy/sign-node.sh NODE_ID CSR [CA_DIR]: where the stack's CA key is
# kept (CA_DIR, default deploy/secrets; keep it off the stack's host),
# sign a GPU node's certificate signing request (deploy/node-request.sh)
# into node.pem beside CSR: CN=NODE_ID, OU octflow-gpu-node (in Temporal
# it may poll and complete GPU stages and report to the fleet, nothing
# else), for OCTFLOW_NODE_CERT_DAYS days (default 90).
#
# OCTFLOW_NODE_CAMPUS=<campus> binds the node to one campus: the
# certificate also names OU campus:<campus>, and the stack's Temporal
# server lets it poll that campus's own GPU queue and its own node queue
# only (the api's OCTFLOW_CAMPUS_OWN_GPUS routes the campus there); its
# bundle from deploy/make-node.sh, made with the same variable, holds
# that campus's payload keys only.
#
# The role and the campus are set here, whatever the request asks; the
# request's CN must be NODE_ID. Each certificate signed is noted in
# CA_DIR/issued-node-certificates (serial, node, campus, expiry), from
# which deploy/revoke-node.sh takes a serial to revoke.
set -eu
NODE=${1:?usage: deploy/sign-node.sh NODE_ID CSR [CA_DIR]}
CSR=${2:?usage: deploy/sign-node.sh NODE_ID CSR [CA_DIR]}
CA=${3:-$(dirname "$0")/secrets}
CAMPUS=${OCTFLOW_NODE_CAMPUS:-}
case "$NODE" in
*[!a-z0-9-]* | -*) echo "sign-node: node ID $NODE: lower-case letters, digits and - only" >&2 && exit 2 ;;
# The stack's own certificate names: a node's certificate must not pass
# for the api's audit client, the server or another service.
octflow-* | temporal* | audit* | api | s3* | localhost) echo "sign-node: node ID $NODE is a name the stack's own certificates use" >&2 && exit 2 ;;
esac
case "$CAMPUS" in
*[!a-z0-9-]* | -*) echo "sign-node: campus $CAMPUS: lower-case letters, digits and - only" >&2 && exit 2 ;;
esac
for f in "$CA/ca.pem" "$CA/ca-key.pem" "$CSR"; do
	[ -s "$f" ] || { echo "sign-node: $f missing" >&2 && exit 1; }
done
openssl req -in "$CSR" -noout -verify 2>/dev/null || { echo "sign-node: $CSR is not a signed request" >&2 && exit 1; }
asked=$(openssl req -in "$CSR" -noout -subject -nameopt sep_multiline,sname | sed -n 's/^ *CN=//p')
[ "$asked" = "$NODE" ] || { echo "sign-node: $CSR asks for CN=$asked, not $NODE" >&2 && exit 1; }
# A key as strong as the stack's own, that Go's TLS takes: EC on P-256,
# P-384 or P-521, Ed25519, or RSA of at least 3072 bits.
text=$(openssl req -in "$CSR" -noout -text)
bits=$(printf '%s\n' "$text" | sed -n 's/^ *Public-Key: (\([0-9]*\) bit)$/\1/p' | head -1)
curve=$(printf '%s\n' "$text" | sed -n 's/^ *NIST CURVE: *//p' | head -1)
case "$(printf '%s\n' "$text" | sed -n 's/^ *Public Key Algorithm: *//p' | head -1)" in
id-ecPublicKey) case "$curve" in
	P-256 | P-384 | P-521) ;;
	*) echo "sign-node: $CSR's EC key is not on P-256, P-384 or P-521" >&2 && exit 1 ;;
	esac ;;
ED25519) ;;
rsaEncryption) [ "${bits:-0}" -ge 3072 ] || { echo "sign-node: $CSR's RSA key has ${bits:-?} bits, want at least 3072" >&2 && exit 1; } ;;
*) echo "sign-node: $CSR's key is neither EC, Ed25519 nor RSA" >&2 && exit 1 ;;
esac
# One node ID is one node: never signed for two campuses (they would
# share its node queue's name).
if [ -e "$CA/issued-node-certificates" ] &&
	awk -v n="$NODE" -v c="${CAMPUS:--}" '$2 "" == n "" && $3 "" != c "" { found = 1 } END { exit !found }' "$CA/issued-node-certificates"; then
	echo "sign-node: $NODE was signed for another campus (or for every campus) before (issued-node-certificates): give this node an ID of its own" >&2
	exit 1
fi
OUT=$(dirname "$CSR")/node.pem
umask 077
EXT=$(mktemp)
trap 'rm -f "$EXT" "$EXT.srl"' EXIT
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$EXT"
openssl x509 -req -in "$CSR" -CA "$CA/ca.pem" -CAkey "$CA/ca-key.pem" -CAcreateserial -CAserial "$EXT.srl" \
	-subj "/OU=octflow-gpu-node${CAMPUS:+/OU=campus:$CAMPUS}/CN=$NODE" \
	-days "${OCTFLOW_NODE_CERT_DAYS:-90}" -extfile "$EXT" -out "$OUT.new" 2>/dev/null
mv "$OUT.new" "$OUT"
chmod 444 "$OUT"
serial=$(openssl x509 -in "$OUT" -noout -serial | sed 's/^serial=//')
until=$(openssl x509 -in "$OUT" -noout -enddate | sed 's/^notAfter=//')
printf '%s %s %s %s\n' "$serial" "$NODE" "${CAMPUS:--}" "$until" >>"$CA/issued-node-certificates"
echo "signed $OUT (CN=$NODE${CAMPUS:+, campus $CAMPUS}, serial $serial, until $until)"
