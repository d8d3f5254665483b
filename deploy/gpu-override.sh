#!/bin/sh
# deploy/gpu-override.sh: give the stack's GPU nodes the host's NVIDIA
# GPUs. docker-compose.yml runs its nodes (gpu-0, gpu-1) on the CPU, so
# that the stack starts on any host; on a GPU host this writes
# docker-compose.gpu.yml, one node per GPU: gpu-0 on GPU 0, gpu-1 on GPU
# 1, gpu-2 … for the GPUs after (each a copy of gpu-1), every one with
# OCTFLOW_GPU_SOURCE=nvml (it refuses to start without its GPU) and only
# its own GPU reserved. A node the host has no GPU for stays on the CPU.
#
#   deploy/gpu-override.sh [--from LISTING] [--out FILE]
#
# It checks first, with a message that says what to fix: that the host
# has NVIDIA's driver (nvidia-smi lists the GPUs) and that Docker has
# NVIDIA's container toolkit (an "nvidia" runtime, or its CDI
# specification). --from reads a saved `nvidia-smi -L` listing instead of
# running nvidia-smi (writing the file for another host; the checks are
# then skipped). Then start the stack with both files:
#
#   docker compose -f docker-compose.yml -f docker-compose.gpu.yml up -d --wait
#
# (or COMPOSE_FILE=docker-compose.yml:docker-compose.gpu.yml in .env).
set -eu

from= out=docker-compose.gpu.yml
while [ $# -gt 0 ]; do
	case "$1" in
	--from) from=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--from NVIDIA_SMI_LISTING] [--out FILE]" >&2; exit 2 ;;
	esac
done

if [ -n "$from" ]; then
	listing=$(cat "$from")
else
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		echo "gpu-override: no NVIDIA driver on this host (nvidia-smi not found). The stack runs its GPU nodes on the CPU as shipped; nothing written." >&2
		exit 1
	fi
	if ! listing=$(nvidia-smi -L 2>&1); then
		echo "gpu-override: nvidia-smi -L failed: $listing" >&2
		echo "gpu-override: the driver is installed but does not answer (not loaded? a version mismatch?); nothing written." >&2
		exit 1
	fi
	runtimes=$(docker info --format '{{json .Runtimes}}' 2>/dev/null || true)
	case "$runtimes" in
	*'"nvidia"'*) ;;
	*)
		if [ ! -e /etc/cdi/nvidia.yaml ] && [ ! -e /var/run/cdi/nvidia.yaml ]; then
			echo "gpu-override: Docker has no NVIDIA runtime and no NVIDIA CDI specification: install NVIDIA's container toolkit (nvidia-ctk runtime configure --runtime=docker, then restart Docker); nothing written." >&2
			exit 1
		fi
		;;
	esac
fi

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)": the index of each GPU.
indexes=$(printf '%s\n' "$listing" | sed -n 's/^GPU \([0-9][0-9]*\): .*/\1/p')
if [ -z "$indexes" ]; then
	echo "gpu-override: no GPU in the listing (want lines like 'GPU 0: NVIDIA … (UUID: GPU-…)'); nothing written." >&2
	exit 1
fi

tmp=$(mktemp "${out}.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
	echo "# Written by deploy/gpu-override.sh: one GPU node per GPU of this host."
	echo "# Use it with docker-compose.yml: docker compose -f docker-compose.yml -f $(basename "$out") up -d --wait"
	echo "services:"
	for i in $indexes; do
		echo "  gpu-$i:"
		if [ "$i" -gt 1 ]; then
			echo "    extends:"
			echo "      file: docker-compose.yml"
			echo "      service: gpu-1"
		fi
		echo "    environment:"
		echo "      OCTFLOW_NODE_ID: gpu-$i"
		echo "      OCTFLOW_NODE_TAKES_DIR: /var/lib/octflow/takes/gpu-$i"
		echo "      OCTFLOW_GPU_SOURCE: nvml"
		echo "    deploy:"
		echo "      resources:"
		echo "        reservations:"
		echo "          devices:"
		echo "            - driver: nvidia"
		echo "              device_ids: [\"$i\"]"
		echo "              capabilities: [gpu, utility]"
	done
} >"$tmp"
# Read by every admin who runs docker compose here, as docker-compose.yml is.
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "gpu-override: wrote $out: $(printf '%s\n' "$indexes" | wc -l | tr -d ' ') GPU node(s), gpu-$(printf '%s' "$indexes" | head -n1)…" >&2
