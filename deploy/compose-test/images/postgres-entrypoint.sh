#!/bin/bash
# The official postgres image's environment contract, in brief: on an
# empty $PGDATA, initdb with POSTGRES_USER (default postgres) as the
# superuser and POSTGRES_PASSWORD (or the file POSTGRES_PASSWORD_FILE
# names), scram-sha-256 for every host
# connection, listen on every address, create POSTGRES_DB (default the
# user's name) and run /docker-entrypoint-initdb.d/*.sql|*.sh, on a
# temporary server that listens on the socket only and takes the
# command's own settings (`postgres -c ssl=on -c hba_file=…` as
# docker-compose.yml gives them: a certificate or file it cannot read
# fails the first start, as in the official image); then start the
# server as the postgres user.
set -Eeuo pipefail
: "${PGDATA:=/var/lib/postgresql/data}"
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
# POSTGRES_PASSWORD_FILE: the password from a file (a Docker secret).
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
	POSTGRES_PASSWORD=$(<"$POSTGRES_PASSWORD_FILE")
	export POSTGRES_PASSWORD
	unset POSTGRES_PASSWORD_FILE
fi
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ]; then
		echo "postgres: POSTGRES_PASSWORD is not set; refusing to create a database without one" >&2
		exit 1
	fi
	user=${POSTGRES_USER:-postgres}
	db=${POSTGRES_DB:-$user}
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	# shellcheck disable=SC2086
	initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
		${POSTGRES_INITDB_ARGS:-} -D "$PGDATA"
	rm -f "$pwfile"
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
	# The official image's docker_temp_server_start: the command's
	# arguments after postgres, then no TCP listener.
	temp=("${@:2}" -c listen_addresses= -p "${PGPORT:-5432}")
	pg_ctl -D "$PGDATA" -o "$(printf '%q ' "${temp[@]}")" -w start
	if [ "$db" != postgres ]; then
		psql -v ON_ERROR_STOP=1 --username "$user" --dbname postgres -c "CREATE DATABASE \"$db\""
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sql) psql -v ON_ERROR_STOP=1 --username "$user" --dbname "$db" -f "$f" ;;
		*.sh) . "$f" ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec "$@"
