# Stand-in for temporalio/admin-tools:1.32.1 (Temporal's
# docker/targets/admin-tools.Dockerfile): temporal-sql-tool, built from
# go.temporal.io/server@v1.32.1's cmd/tools/sql, and the module's schema
# directory at /etc/temporal/schema. The official image also holds the
# temporal CLI, tdbg, temporal-cassandra-tool and
# temporal-elasticsearch-tool; the stack runs none of them, so they are
# not built here.
FROM octflow-test/alpine-like:1
COPY temporal-sql-tool /usr/local/bin/temporal-sql-tool
COPY schema /etc/temporal/schema
USER temporal
CMD ["sh", "-c", "trap exit INT HUP TERM; sleep infinity & wait"]
