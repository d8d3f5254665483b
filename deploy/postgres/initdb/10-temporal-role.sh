# Sourced by the postgres image's entrypoint once, when it creates the
# database cluster (an empty volume): Temporal's own role, which may log
# in and create databases (its two, which it then owns, with the
# btree_gin extension its visibility schema uses: a trusted extension,
# which a database's owner may create), and nothing more: no superuser,
# no role creation. Its password is the secret temporal-db-password,
# which Temporal's server and schema job read too. A cluster made before
# this script: see docs/operations.md (*What is open by default*).
temporal_pw=$(cat /run/secrets/temporal-db-password)
[ -n "$temporal_pw" ] || { echo "the secret temporal-db-password is empty" >&2; exit 1; }
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres --set pw="$temporal_pw" <<'SQL'
CREATE ROLE temporal LOGIN CREATEDB NOSUPERUSER NOCREATEROLE PASSWORD :'pw';
SQL
unset temporal_pw
