# octflow: one image, every role (api, worker, gpuworker). Built in two
# stages: the Go toolchain compiles the binary (cgo on, for NVML), the
# runtime image carries only the binary and its C library.
#
#   docker build -t octflow:dev .
#
# /var/spool/octflow-audit is the api's audit journal (OCTFLOW_AUDIT_SPOOL),
# /var/spool/octflow-uploads its upload spool (OCTFLOW_SPOOL_DIR) and
# /var/lib/octflow/takes a GPU node's take notes (OCTFLOW_NODE_TAKES_DIR,
# a directory per node under it) when a volume is mounted there: a new
# volume takes its owner from here. Every other path may be read-only.
#
# GPU nodes: the NVIDIA container toolkit mounts the driver's NVML
# library into the container when the service reserves GPUs (see
# docker-compose.yml); the binary opens it at start and falls back to
# simulated GPUs where it is absent.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
ENV GOTOOLCHAIN=local CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version is the VERSION file; the commit is OCTFLOW_COMMIT where the
# build passes it, else a digest of the source (the context has no .git),
# so that two builds of different code never share a Worker Deployment
# build ID (`octflow version`; docs/operations.md, Upgrades).
ARG OCTFLOW_COMMIT=
RUN commit="${OCTFLOW_COMMIT:-src-$(find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -not -path './.cache/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)}" \
 && go build -trimpath -ldflags="-s -w -X octflow/internal/buildinfo.version=$(cat VERSION) -X octflow/internal/buildinfo.commit=${commit}" \
      -o /out/octflow ./cmd/octflow

FROM debian:bookworm-20251117-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home /var/lib/octflow --create-home octflow \
 && install -d -o octflow -g octflow -m 700 /var/spool/octflow-audit /var/spool/octflow-uploads /var/lib/octflow/takes
COPY --from=build /out/octflow /usr/local/bin/octflow
USER octflow
WORKDIR /var/lib/octflow
# No GPU is asked for here: a GPU service gets its GPUs (and NVML's
# "utility" capability) from its device reservation
# (deploy/gpu-override.sh), and no other service sees one.
ENV OCTFLOW_LOG_FORMAT=json
ENTRYPOINT ["/usr/local/bin/octflow"]
CMD ["help"]
