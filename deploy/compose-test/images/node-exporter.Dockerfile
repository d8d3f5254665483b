# Stand-in for prom/node-exporter (node_exporter's Dockerfile: a busybox
# image with the binary at /bin/node_exporter, user nobody, port 9100):
# Debian's prometheus-node-exporter (the version of the machine's
# package, named in the test's output) in that layout.
FROM octflow-test/alpine-like:1
COPY node_exporter /bin/node_exporter
EXPOSE 9100
USER nobody
ENTRYPOINT ["/bin/node_exporter"]
