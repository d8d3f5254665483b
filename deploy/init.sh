#!/bin/sh
# deploy/init.sh: set up the compose stack on this host, in one command,
# from the operator's answers:
#
#   deploy/init.sh --public-url https://octflow.hospital.example.net \
#       --oncall-url URL --ticket-url URL --heartbeat-url URL \
#       [--api-hosts "NAME NAME…"] [--remote-nodes] [--force]
#
# It writes, next to docker-compose.yml:
#
#   .env                 the settings every later `docker compose` reads
#                        there, from any shell (another admin, cron, after
#                        a reboot): OCTFLOW_PUBLIC_URL, OCTFLOW_API_HOSTS,
#                        OCTFLOW_TEMPORAL_BIND and OCTFLOW_S3_BIND (this
#                        host's loopback, or every address with
#                        --remote-nodes, for GPU nodes on other hosts),
#                        and COMPOSE_FILE with docker-compose.gpu.yml
#                        where deploy/gpu-override.sh wrote one;
#   deploy/secrets/      every generated secret (deploy/make-secrets.sh)
#                        and certificate (deploy/make-certs.sh, for the
#                        public URL's host and --api-hosts);
#   deploy/secrets/alertmanager.yml
#                        the shipped example with the three receivers'
#                        URLs (page, ticket, dead man's switch);
#   deploy/secrets/tokens.json
#                        one admin token, printed once on the standard
#                        output (only its hash is kept): add devices,
#                        routers and clinicians with `octflow admin token
#                        mint` (docs/operations.md, Tokens), which keeps
#                        this file's mode.
#
# It refuses what would leave the stack pointing at a placeholder: an
# example.org (or .com, .net) URL, a public URL that is not https, a
# receiver URL that is not http(s), and an existing .env (unless
# --force: secrets and certificates that exist are kept either way).
# Then: docker compose up -d --wait.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
public= oncall= ticket= heartbeat= hosts= remote=false force=false
usage() {
	echo "usage: $0 --public-url URL --oncall-url URL --ticket-url URL --heartbeat-url URL [--api-hosts NAMES] [--remote-nodes] [--force]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--public-url) public=${2:-}; shift 2 ;;
	--oncall-url) oncall=${2:-}; shift 2 ;;
	--ticket-url) ticket=${2:-}; shift 2 ;;
	--heartbeat-url) heartbeat=${2:-}; shift 2 ;;
	--api-hosts) hosts=${2:-}; shift 2 ;;
	--remote-nodes) remote=true; shift ;;
	--force) force=true; shift ;;
	*) usage ;;
	esac
done
fail() {
	echo "init: $*" >&2
	exit 1
}
[ -n "$public" ] && [ -n "$oncall" ] && [ -n "$ticket" ] && [ -n "$heartbeat" ] || usage

# placeholder URL: the example domains (RFC 2606), which reach no one,
# in any case.
placeholder() {
	case "$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]')" in
	*://example.org* | *://*.example.org* | *://example.com* | *://*.example.com* | *://example.net* | *://*.example.net*) return 0 ;;
	esac
	return 1
}
# plain: a URL of the characters a URL may hold unescaped, and none that
# a shell, sed, YAML or .env would read as its own (no space, quote,
# backslash, |, $ or backquote).
plain() {
	case "$1" in
	*[!A-Za-z0-9._~:/?#@!\&\(\)*+,\;=%\[\]-]*) return 1 ;;
	esac
	return 0
}
# sed_escaped: $1 as a sed replacement between | delimiters.
sed_escaped() { printf '%s' "$1" | sed -e 's/[&|\\]/\\&/g'; }
host_of() { printf '%s\n' "$1" | sed -E 's|^[a-z]+://([^/:]+).*|\1|'; }
case "$public" in
https://?*) ;;
*) fail "--public-url $public: want https://…, the address devices and browsers reach the api by" ;;
esac
placeholder "$public" && fail "--public-url $public is a placeholder: give the name your devices and browsers use"
plain "$public" || fail "--public-url: a URL of plain URL characters only (percent-encode the rest)"
for u in "$oncall" "$ticket" "$heartbeat"; do
	case "$u" in
	http://?* | https://?*) ;;
	*) fail "receiver URL $u: want an http(s) URL that takes Alertmanager's webhook" ;;
	esac
	placeholder "$u" && fail "receiver URL $u is a placeholder: alerts would reach no one"
	plain "$u" || fail "receiver URL: a URL of plain URL characters only (percent-encode the rest)"
done
command -v sha256sum >/dev/null 2>&1 && command -v openssl >/dev/null 2>&1 || fail "needs openssl and sha256sum"
[ ! -e "$ROOT/.env" ] || $force || fail "$ROOT/.env exists: the stack is set up (--force writes it again; secrets and certificates that exist are kept)"

hosts=${hosts:-$(host_of "$public")}
bind=127.0.0.1
$remote && bind=0.0.0.0
compose_file=
[ -e "$ROOT/docker-compose.gpu.yml" ] && compose_file=docker-compose.yml:docker-compose.gpu.yml

"$HERE/make-secrets.sh" "$HERE" >/dev/null
OCTFLOW_API_HOSTS=$hosts "$HERE/make-certs.sh" "$HERE/secrets" >/dev/null
secrets=$HERE/secrets

# The receivers, by name, in the shipped example.
sed -E -e "s|https://oncall\.example\.org/[^ ]*|'$(sed_escaped "$oncall")'|" -e "s|https://tickets\.example\.org/[^ ]*|'$(sed_escaped "$ticket")'|" \
	-e "s|https://heartbeat\.example\.org/[^ ]*|'$(sed_escaped "$heartbeat")'|" "$HERE/alertmanager/alertmanager.example.yml" >"$secrets/alertmanager.yml.new"
for u in "$oncall" "$ticket" "$heartbeat"; do
	grep -qF "url: '$u'" "$secrets/alertmanager.yml.new" || {
		rm -f "$secrets/alertmanager.yml.new"
		fail "the receiver $u did not land in alertmanager.yml; nothing written"
	}
done
if grep -q 'url: .*example\.org' "$secrets/alertmanager.yml.new"; then
	rm -f "$secrets/alertmanager.yml.new"
	fail "deploy/alertmanager/alertmanager.example.yml has a receiver this script does not know; nothing written"
fi
if command -v amtool >/dev/null 2>&1 && ! amtool check-config "$secrets/alertmanager.yml.new" >/dev/null; then
	rm -f "$secrets/alertmanager.yml.new"
	fail "amtool check-config refuses the Alertmanager configuration made from your receivers"
fi
mv "$secrets/alertmanager.yml.new" "$secrets/alertmanager.yml"
# Alertmanager runs as nobody: readable by all, in a directory only its
# owner enters.
chmod 444 "$secrets/alertmanager.yml"

# The first token: an admin's, shown once. Written here with openssl and
# sha256sum, not by `octflow admin token mint`: on a new host neither the
# octflow binary nor its image exists before `docker compose up --build`.
# The format is api/auth's, which the command reads and keeps
# (deploy/compose-test.TestInitSetsTheStackUpFromTheOperatorsAnswers loads
# it with api/auth).
if [ ! -s "$secrets/tokens.json" ]; then
	token=octflow-admin-$(openssl rand -hex 24)
	hash=$(printf '%s' "$token" | sha256sum | cut -d' ' -f1)
	printf '[\n  {"sha256": "%s", "role": "admin", "name": "first admin (deploy/init.sh)"}\n]\n' "$hash" >"$secrets/tokens.json"
	chmod 444 "$secrets/tokens.json"
	echo "admin token (shown once; only its hash is kept in deploy/secrets/tokens.json):"
	echo "$token"
fi

tmp=$ROOT/.env.new
{
	echo "# Written by deploy/init.sh; every docker compose run in this directory reads it."
	# Single quotes: Compose takes the values as they are.
	echo "OCTFLOW_PUBLIC_URL='$public'"
	echo "OCTFLOW_API_HOSTS='$hosts'"
	echo "OCTFLOW_TEMPORAL_BIND='$bind'"
	echo "OCTFLOW_S3_BIND='$bind'"
	[ -z "$compose_file" ] || echo "COMPOSE_FILE='$compose_file'"
} >"$tmp"
mv "$tmp" "$ROOT/.env"
echo "init: wrote .env, deploy/secrets (secrets, certificates, alertmanager.yml, tokens.json); next: docker compose up -d --wait" >&2
