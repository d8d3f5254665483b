# Stand-in for prom/node-exporter (node_exporter's Dockerfile: a busybox
# image with the binary at /bin/node_exporter, user nobody, port 9100):
# Debian's prometheus-node-exporter (the version of the machine's
# package, named in the test's output) in that layout. It takes the
# shipped flags, --web.config.file (HTTPS, deploy/prometheus/web.yml)
# among them (Debian bookworm's 1.5.0 does).
FROM octflow-test/alpine-like:1
COPY node_exporter /bin/node_exporter
EXPOSE 9100
USER nobody
ENTRYPOINT ["/bin/node_exporter"]
