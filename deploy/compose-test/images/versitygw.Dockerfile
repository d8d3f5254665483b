# Stand-in for versity/versitygw:v1.8.0 (the module's own Dockerfile):
# versitygw built from github.com/versity/versitygw@v1.8.0's
# cmd/versitygw, its docker-entrypoint.sh, the two setup directories;
# runs as root like the official image.
FROM octflow-test/alpine-like:1
RUN mkdir -p /tmp/vgw
COPY versitygw /usr/local/bin/versitygw
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
