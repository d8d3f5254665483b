# Sourced by the postgres image's entrypoint once, when it creates the
# database cluster (an empty volume): Temporal's own role, which may log
# in and create databases (its two, which it then owns, with the
# btree_gin extension its visibility schema uses: a trusted extension,
# which a database's owner may create), and nothing more: no superuser,
# no role creation. Its password is POSTGRES_PWD, the variable
# Temporal's image reads. A cluster made before this script: run the
# same statement once (docs/operations.md, *PostgreSQL*).
: "${POSTGRES_PWD:?the password of the temporal role is not set}"
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres --set pw="$POSTGRES_PWD" <<'SQL'
CREATE ROLE temporal LOGIN CREATEDB NOSUPERUSER NOCREATEROLE PASSWORD :'pw';
SQL
