#!/bin/sh
# The S3 service's start (docker-compose.yml, s3): versitygw's own
# entrypoint, with its root account and its HTTPS certificate from the
# stack's secrets, an account per role: the worker's
# (octflow-s3-access-key, octflow-s3-secret-key), the api's (api-s3-*),
# this host's GPU services' (gpu-s3-*), and one more per GPU node on
# another host, from s3-node-accounts (deploy/make-node.sh: "NODE ACCESS_KEY
# SECRET_KEY" a line). Those accounts have the role user: they own
# nothing, and deploy/s3/setup.sh's bucket policy gives octflow's the
# bucket's objects and the nodes' what GPU stages need, nothing else.
# The account file is rebuilt on every start, so the secrets are the only
# place accounts are kept.
set -eu
ROOT_ACCESS_KEY_ID=$(cat /run/secrets/s3-access-key)
ROOT_SECRET_ACCESS_KEY=$(cat /run/secrets/s3-secret-key)
export ROOT_ACCESS_KEY_ID ROOT_SECRET_ACCESS_KEY
VGW_IAM_DIR=/tmp/vgw-iam
export VGW_IAM_DIR
rm -rf "$VGW_IAM_DIR"
mkdir -p "$VGW_IAM_DIR"
chmod 700 "$VGW_IAM_DIR"
{
	echo "octflow $(cat /run/secrets/octflow-s3-access-key) $(cat /run/secrets/octflow-s3-secret-key)"
	echo "api $(cat /run/secrets/api-s3-access-key) $(cat /run/secrets/api-s3-secret-key)"
	echo "local-gpus $(cat /run/secrets/gpu-s3-access-key) $(cat /run/secrets/gpu-s3-secret-key)"
	cat /run/secrets/s3-node-accounts
} | awk '
	/^[ \t]*(#|$)/ { next }
	NF != 3 || $2 !~ /^[A-Za-z0-9]+$/ || $3 !~ /^[A-Za-z0-9+\/]+$/ {
		print "s3 account line " NR " (octflow, api, local-gpus, then s3-node-accounts): want NODE ACCESS_KEY SECRET_KEY (letters and digits)" > "/dev/stderr"
		bad = 1
		exit 1
	}
	{ out = out (n++ ? "," : "") "\"" $2 "\":{\"access\":\"" $2 "\",\"secret\":\"" $3 "\",\"role\":\"user\"}" }
	END { if (!bad) print "{\"accessAccounts\":{" out "}}" }
' >"$VGW_IAM_DIR/users.json"
echo "s3: $(grep -c -v -E '^[[:space:]]*(#|$)' /run/secrets/s3-node-accounts || true) GPU-node account(s)"
exec /usr/local/bin/docker-entrypoint.sh
