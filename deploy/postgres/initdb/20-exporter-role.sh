# postgres-exporter's role, which may log in and read the server's
# statistics and settings (pg_monitor) and nothing more, its password the
# secret postgres-exporter-password (which postgres-exporter reads too).
# Idempotent: made if missing, else set again to the secret's password
# and pg_monitor only. Sourced twice over:
#   - by the postgres image's entrypoint when it creates the cluster (an
#     empty volume), over the local socket;
#   - by the postgres-roles job of docker-compose.yml on every `up`, over
#     the network as the superuser (PGHOST, PGPASSWORD), so that a
#     cluster made before this script, or a changed secret, gets the role
#     too (docs/operations.md, Runbook: PostgreSQL).
exporter_pw=$(cat /run/secrets/postgres-exporter-password)
[ -n "$exporter_pw" ] || { echo "the secret postgres-exporter-password is empty" >&2; exit 1; }
psql -v ON_ERROR_STOP=1 -q --username "${POSTGRES_USER:-postgres}" --dbname postgres --set pw="$exporter_pw" <<'SQL'
SET client_min_messages = warning;
SELECT 'CREATE ROLE postgres_exporter' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'postgres_exporter') \gexec
ALTER ROLE postgres_exporter LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'pw';
GRANT pg_monitor TO postgres_exporter;
SQL
unset exporter_pw
