#!/bin/sh
# The S3 setup job (docker-compose.yml, s3-setup), run on every up: the
# bucket, made with the root account if it is missing, and its policy, an
# account per role: the worker's (octflow-s3-access-key) the bucket's
# objects; the api's (api-s3-access-key) reading and writing them,
# deleting only intake markers; and the GPU nodes' (this host's
# gpu-s3-access-key, and each of s3-node-accounts, deploy/make-node.sh)
# reading an exam's scan and its stage outputs and writing only what GPU
# stages write (the denoised volume, intensity, layers, lesions and their
# labels, measurements): no sealed identity, report or record can be read
# from a node, nothing but stage outputs written, nothing deleted, no
# bucket setting changed. Requests are
# signed (AWS SigV4) by curl; S3 is reached over TLS with the stack's CA.
set -eu
BUCKET=${OCTFLOW_S3_BUCKET:-octflow}
URL=https://${OCTFLOW_S3_ENDPOINT:-s3:7070}/$BUCKET
s3() { # METHOD QUERY [curl args]: prints the HTTP status
	method=$1 query=$2
	shift 2
	curl -sS -m 20 -o /tmp/s3-answer -w '%{http_code}' --cacert /run/secrets/ca.pem \
		--aws-sigv4 "aws:amz:${OCTFLOW_S3_REGION:-us-east-1}:s3" \
		--user "$(cat /run/secrets/s3-access-key):$(cat /run/secrets/s3-secret-key)" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X "$method" "$@" "$URL$query"
}
code=$(s3 PUT "")
case "$code" in
200) echo "s3-setup: made bucket $BUCKET" ;;
409) ;; # there already, and the root account's
*)
	echo "s3-setup: creating bucket $BUCKET answered $code: $(cat /tmp/s3-answer)" >&2
	exit 1
	;;
esac
octflow=$(cat /run/secrets/octflow-s3-access-key)
api=$(cat /run/secrets/api-s3-access-key)
keys=$(awk '!/^[ \t]*(#|$)/ { printf "%s\"%s\"", (n++ ? "," : ""), $2 }' /run/secrets/s3-node-accounts)
# The GPU services of this host share one node account.
keys="\"$(cat /run/secrets/gpu-s3-access-key)\"${keys:+,}$keys"
# octflow's account (the worker): the bucket's objects (the sweep deletes
# what no exam needs), nothing of the bucket's settings.
statements='{"Sid": "worker", "Effect": "Allow", "Principal": {"AWS": ["'"$octflow"'"]},
  "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
  "Resource": ["arn:aws:s3:::'"$BUCKET"'", "arn:aws:s3:::'"$BUCKET"'/*"]}'
# The api's account: it stores scans, identities, records and intake
# markers and reads reports; it deletes only its own intake markers.
statements="$statements,
 {\"Sid\": \"api\", \"Effect\": \"Allow\", \"Principal\": {\"AWS\": [\"$api\"]},
  \"Action\": [\"s3:GetObject\", \"s3:PutObject\", \"s3:ListBucket\", \"s3:AbortMultipartUpload\", \"s3:ListMultipartUploadParts\"],
  \"Resource\": [\"arn:aws:s3:::$BUCKET\", \"arn:aws:s3:::$BUCKET/*\"]},
 {\"Sid\": \"api-intake-markers\", \"Effect\": \"Allow\", \"Principal\": {\"AWS\": [\"$api\"]},
  \"Action\": [\"s3:DeleteObject\"], \"Resource\": [\"arn:aws:s3:::$BUCKET/exams/*/intake-*.json\"]}"
# GPU nodes: read an exam's scan and what GPU stages wrote, write only
# that; never an identity, a report, a record or a marker, never delete.
outputs=""
for name in denoised.dcm intensity.json layers.json lesions.json lesion-labels.nrrd measurements.json; do
	outputs="$outputs${outputs:+, }\"arn:aws:s3:::$BUCKET/exams/*/$name\""
done
statements="$statements,
 {\"Sid\": \"gpu-nodes-list\", \"Effect\": \"Allow\", \"Principal\": {\"AWS\": [$keys]},
  \"Action\": [\"s3:ListBucket\"], \"Resource\": [\"arn:aws:s3:::$BUCKET\"]},
 {\"Sid\": \"gpu-nodes-read\", \"Effect\": \"Allow\", \"Principal\": {\"AWS\": [$keys]},
  \"Action\": [\"s3:GetObject\"],
  \"Resource\": [\"arn:aws:s3:::$BUCKET/exams/*/scan-*.dcm\", $outputs]},
 {\"Sid\": \"gpu-nodes-write-stage-outputs\", \"Effect\": \"Allow\", \"Principal\": {\"AWS\": [$keys]},
  \"Action\": [\"s3:PutObject\", \"s3:AbortMultipartUpload\", \"s3:ListMultipartUploadParts\"],
  \"Resource\": [$outputs]}"
printf '{"Version": "2012-10-17", "Statement": [\n %s]}\n' "$statements" >/tmp/policy.json
code=$(s3 PUT "?policy=" -H "Content-Type: application/json" --data-binary @/tmp/policy.json)
case "$code" in
200 | 204) echo "s3-setup: bucket policy for the worker's and the api's accounts and the GPU-node accounts [$keys]" ;;
*)
	echo "s3-setup: the bucket policy answered $code: $(cat /tmp/s3-answer)" >&2
	exit 1
	;;
esac
