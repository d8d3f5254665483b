# Stand-in for prometheuscommunity/postgres-exporter (postgres_exporter's
# Dockerfile: a busybox image with the binary at /bin/postgres_exporter,
# user nobody, port 9187): Debian's prometheus-postgres-exporter (the
# version of the machine's package, named in the test's output) in that
# layout, reading the same DATA_SOURCE_URI, DATA_SOURCE_USER and
# DATA_SOURCE_PASS_FILE, and the shipped --web.config.file (HTTPS,
# deploy/prometheus/web.yml; Debian bookworm's 0.11.1 takes it).
FROM octflow-test/alpine-like:1
COPY postgres_exporter /bin/postgres_exporter
EXPOSE 9187
USER nobody
ENTRYPOINT ["/bin/postgres_exporter"]
