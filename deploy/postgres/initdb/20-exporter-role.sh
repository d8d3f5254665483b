# Sourced by the postgres image's entrypoint once, when it creates the
# database cluster (an empty volume): postgres-exporter's role, which may
# log in and read the server's statistics and settings (pg_monitor) and
# nothing more. Its password is the secret postgres-exporter-password,
# which postgres-exporter reads too. A cluster made before this script:
# docs/operations.md (Alerts: PostgreSQL) gives the statement to run once.
exporter_pw=$(cat /run/secrets/postgres-exporter-password)
[ -n "$exporter_pw" ] || { echo "the secret postgres-exporter-password is empty" >&2; exit 1; }
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres --set pw="$exporter_pw" <<'SQL'
CREATE ROLE postgres_exporter LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'pw' IN ROLE pg_monitor;
SQL
unset exporter_pw
