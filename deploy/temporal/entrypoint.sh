#!/bin/sh
# The start of octflow's Temporal server image (deploy/temporal/Dockerfile):
# bind where the configuration says, or on the container's own address,
# then start every service with the configuration the server renders from
# the environment (as the official image's entrypoint does).
set -eu
: "${BIND_ON_IP:=$(getent hosts "$(hostname)" | awk '{ print $1; exit }')}"
export BIND_ON_IP
if [ "$BIND_ON_IP" = 0.0.0.0 ] || [ "$BIND_ON_IP" = ::0 ]; then
	: "${TEMPORAL_BROADCAST_ADDRESS:=$(getent hosts "$(hostname)" | awk '{ print $1; exit }')}"
	export TEMPORAL_BROADCAST_ADDRESS
fi
exec temporal-server start
