# Stand-in for postgres:*-bookworm: Debian bookworm's PostgreSQL (15; the
# official tag the stack pins may be newer) behind the official image's
# environment contract (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB,
# PGDATA, POSTGRES_INITDB_ARGS, /docker-entrypoint-initdb.d), started by
# a small entrypoint of our own (docker-entrypoint.sh here).
FROM octflow-test/debian:bookworm
# postgres is uid and gid 999, as in the official image, which the
# secrets deploy/make-secrets.sh gives it are owned by.
RUN groupadd --system --gid 999 postgres \
 && useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql --shell /bin/bash postgres \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-common \
 && sed -ri 's/#(create_main_cluster) .*$/\1 = false/' /etc/postgresql-common/createcluster.conf \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql /docker-entrypoint-initdb.d \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
 && chmod 700 /var/lib/postgresql/data
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME ["/var/lib/postgresql/data"]
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
