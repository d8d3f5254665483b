# Stand-in for temporalio/server:1.32.1, made of what Temporal's own
# docker/targets/server.Dockerfile puts in the official image: the
# temporal-server binary (built from go.temporal.io/server@v1.32.1's
# cmd/server), the entrypoint script of that module's
# docker/scripts/sh/, the uid 1000 user temporal, workdir /etc/temporal.
# The base stands in for Alpine: busybox is /bin/sh and every other
# command, plus CA certificates and tzdata. Nothing else, so a
# healthcheck that names a program the official image lacks fails here too.
FROM octflow-test/alpine-like:1
COPY temporal-server /usr/local/bin/temporal-server
COPY entrypoint.sh /etc/temporal/entrypoint.sh
WORKDIR /etc/temporal
USER temporal
CMD ["/etc/temporal/entrypoint.sh"]
