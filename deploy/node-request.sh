#!/bin/sh
# deploy/node-request.sh NODE_ID [DIR]: on a GPU node's own host, the
# node's private key and a certificate signing request for it, into DIR
# (default ./NODE_ID, the node's bundle; docs/operations.md, *A GPU node
# on another host*):
#
#   node-key.pem  the node's private key: it never leaves this host
#   node.csr      the request: send it to whoever keeps the stack's CA
#                 key, who signs it with deploy/sign-node.sh and sends
#                 back node.pem
#
# Run it again to renew the certificate (a new key, a new request); the
# old certificate stays valid until it expires (OCTFLOW_NODE_CERT_DAYS,
# default 90) unless deploy/revoke-node.sh revokes it.
set -eu
NODE=${1:?usage: deploy/node-request.sh NODE_ID [DIR]}
D=${2:-./$NODE}
case "$NODE" in
*[!a-z0-9-]* | -*) echo "node-request: node ID $NODE: lower-case letters, digits and - only" >&2 && exit 2 ;;
esac
mkdir -p "$D"
chmod 700 "$D"
umask 077
# The role and the campus are the signer's to set; the request names the
# node only.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$NODE" \
	-keyout "$D/node-key.pem.new" -out "$D/node.csr" 2>/dev/null
mv "$D/node-key.pem.new" "$D/node-key.pem"
# On the node, octflow (uid 10001) and the tunnel read the key; the
# bundle's directory keeps everyone else out.
chmod 444 "$D/node-key.pem"
echo "made $D/node-key.pem and $D/node.csr; send node.csr to the CA's keeper (deploy/sign-node.sh $NODE node.csr CA_DIR) and put the node.pem you get back in $D"
