#!/bin/bash
# Checks the image `make image` built (IMAGE, default localhost/balde:latest)
# the way the README's container examples and deploy/compose.yaml run it,
# without a container runtime (none runs on these machines): the image's
# root file system is mounted by buildah and its binary started in it with
# chroot, as the image's user, on the host's loopback. It checks the image's
# user, entrypoint and CA bundle; then runs
#   - the README's `docker run … gateway dict`: its variables, its clients
#     file and TLS pair at the paths its volume gives them, against a DICT
#     simulator;
#   - every balde service of deploy/compose.yaml (serve, gateway dict,
#     gateway sifen) with the command and environment the file gives it, its
#     secrets at /run/secrets, against the simulators;
# and checks each gets ready (/readyz 200, over TLS for the gateways), that a
# gateway refuses a request without a client's credential (401) and serves
# its client. Addresses become loopback ports, and the database
# BALDE_TEST_POSTGRES_DSN (in a schema of its own) when it is set, else
# SQLite in the image's /data; the DICT's and SIFEN's certificates are left
# out (the simulators speak plain HTTP). Needs root (chroot), buildah,
# openssl, curl and python3 with yaml.
set -euo pipefail
image=${IMAGE:-localhost/balde:latest}
buildah() { command buildah --storage-driver vfs "$@"; }
fail() { echo "image-check: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "image-check: skipped: chroot needs root" >&2; exit 0; }

user=$(buildah inspect --format '{{.OCIv1.Config.User}}' "$image")
entry=$(buildah inspect --format '{{.OCIv1.Config.Entrypoint}}' "$image")
[ "$user" = "65532:65532" ] || fail "the image runs as '$user', want the non-root 65532:65532"
[ "$entry" = '[/usr/local/bin/balde]' ] || fail "entrypoint $entry"

work=$(mktemp -d)
ctr=$(buildah from "$image")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  buildah umount "$ctr" >/dev/null 2>&1 || true
  buildah rm "$ctr" >/dev/null 2>&1 || true
  if [ -n "${schema:-}" ]; then psql -q "$BALDE_TEST_POSTGRES_DSN" -c "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
root=$(buildah mount "$ctr")
[ -s "$root/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA bundle at /etc/ssl/certs/ca-certificates.crt"
version=$(chroot --userspec=65532:65532 "$root" /usr/local/bin/balde version) || fail "balde version did not run in the image"
echo "image-check: $image runs as $user: $version"

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
${GO:-go} build -o "$work/dictsim" ./cmd/dictsim
${GO:-go} build -o "$work/sifensim" ./cmd/sifensim
dictport=$(freeport)
"$work/dictsim" --addr "127.0.0.1:$dictport" --category A >"$work/dictsim.log" 2>&1 &
pids+=($!)
sifenport=$(freeport)
"$work/sifensim" --addr "127.0.0.1:$sifenport" >"$work/sifensim.log" 2>&1 &
pids+=($!)

db="sqlite:///data/balde.db"
if [ -n "${BALDE_TEST_POSTGRES_DSN:-}" ] && command -v psql >/dev/null; then
  schema="image_check_$$"
  psql -q "$BALDE_TEST_POSTGRES_DSN" -c "CREATE SCHEMA $schema" >/dev/null
  sep='?'; case "$BALDE_TEST_POSTGRES_DSN" in *\?*) sep='&';; esac
  db="$BALDE_TEST_POSTGRES_DSN${sep}search_path=$schema"
fi

# The client credentials and TLS material, as an operator makes them: a CA,
# the gateways' certificate for 127.0.0.1, a client's token in the clients
# file by its SHA-256.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=image-check CA" \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$work/gateway.key" -out "$work/gateway.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$work/ext"
openssl x509 -req -in "$work/gateway.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
  -extfile "$work/ext" -out "$work/gateway.pem" 2>/dev/null
token=$(openssl rand -hex 24)
printf 'erp sha256:%s\n' "$(printf %s "$token" | sha256sum | cut -d' ' -f1)" > "$work/clients"
# put FILE PATH: a file at PATH in the image, readable by its user.
put() { mkdir -p "$root$(dirname "$2")"; install -m 0400 -o 65532 -g 65532 "$1" "$root$2"; }

# ready NAME URL PID: /readyz of URL answers 200 (over TLS, trusting the CA).
ready() {
  for _ in $(seq 150); do
    if code=$(curl -s --cacert "$work/ca.pem" -o /dev/null -w '%{http_code}' "$2/readyz") && [ "$code" = 200 ]; then
      echo "image-check: $1 from the image is ready on ${2#*://} (database ${db%%\?*})"
      return 0
    fi
    kill -0 "$3" 2>/dev/null || { cat "$work/$1.log" >&2; fail "$1 exited"; }
    sleep 0.2
  done
  cat "$work/$1.log" >&2
  fail "$1 from the image was not ready within 30 s"
}

# clientsOnly NAME URL PATH: without a credential 401, with the client's token not 401.
clientsOnly() {
  local code
  code=$(curl -s --cacert "$work/ca.pem" -o /dev/null -w '%{http_code}' -X POST "$2$3")
  [ "$code" = 401 ] || fail "$1: a request without a client's credential got $code, want 401"
  code=$(curl -s --cacert "$work/ca.pem" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$2$3")
  [ "$code" != 401 ] && [ "$code" != 000 ] || fail "$1: the client's request got $code"
  echo "image-check: $1 refuses a request without a client's credential (401) and serves its client ($code)"
}

# The README's `docker run … gateway dict`, on loopback: its clients file
# and TLS pair under /etc/balde (its -v /etc/balde:/etc/balde:ro).
put "$work/clients" /etc/balde/clients
put "$work/gateway.pem" /etc/balde/gateway.pem
put "$work/gateway.key" /etc/balde/gateway.key
port=$(freeport)
env -i PATH="$PATH" BALDE_DB="$db" BALDE_DICT_URL="http://127.0.0.1:$dictport" BALDE_DICT_PARTICIPANT=12345678 \
  BALDE_GATEWAY_CLIENTS_FILE=/etc/balde/clients \
  BALDE_GATEWAY_TLS_CERT=/etc/balde/gateway.pem BALDE_GATEWAY_TLS_KEY=/etc/balde/gateway.key \
  BALDE_GATEWAY_ADDR="127.0.0.1:$port" HOME=/data BALDE_DATA_DIR=/data \
  chroot --userspec=65532:65532 "$root" /usr/local/bin/balde gateway dict >"$work/readme-gateway-dict.log" 2>&1 &
pids+=($!)
ready readme-gateway-dict "https://127.0.0.1:$port" "$!"
clientsOnly readme-gateway-dict "https://127.0.0.1:$port" "/api/v2/policies/"

# Every balde service of deploy/compose.yaml, as the file runs it.
put "$work/clients" /run/secrets/clients
put "$work/gateway.pem" /run/secrets/gateway.pem
put "$work/gateway.key" /run/secrets/gateway.key
put "$work/ca.pem" /run/secrets/clients-ca.pem
printf 'image-check-admin\n' > "$work/admin-password"
put "$work/admin-password" /run/secrets/admin-password
printf 'postgres:5432:balde:balde:unused\n' > "$work/pgpass"
put "$work/pgpass" /run/secrets/pgpass
python3 - deploy/compose.yaml "$image" > "$work/services" <<'EOF'
# One line per balde service: its name, then NUL-free shell words of its
# command and environment, ${VAR:-default} expanded to the default and
# ${VAR:?…} to a placeholder the check overrides.
import re, shlex, sys, yaml
compose = yaml.safe_load(open(sys.argv[1]))
def expand(v):
    v = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(v))
    return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "override", v)
found = 0
for name, svc in compose["services"].items():
    if svc.get("image") != sys.argv[2]:
        continue
    found += 1
    env = {k: expand(v) for k, v in (svc.get("environment") or {}).items()}
    print(name, " ".join(shlex.quote(expand(c)) for c in svc["command"]), "|",
          " ".join(shlex.quote(k + "=" + v) for k, v in sorted(env.items())))
if found < 3:
    sys.exit("deploy/compose.yaml: %d services run %s, want serve and both gateways" % (found, sys.argv[2]))
EOF
while IFS= read -r line; do
  name=${line%% *}; rest=${line#* }
  eval "cmd=(${rest%%|*})"; eval "environ=(${rest#*|})"
  port=$(freeport)
  over=(BALDE_DB="$db" BALDE_DICT_URL="http://127.0.0.1:$dictport" BALDE_DICT_PARTICIPANT=12345678
        BALDE_SIFEN_URL="http://127.0.0.1:$sifenport/{env}" BALDE_DICT_CERT= BALDE_DICT_KEY= BALDE_DICT_CA= BALDE_DICT_VERIFY_CERT=
        BALDE_SIFEN_CERT= BALDE_SIFEN_KEY= HOME=/data BALDE_DATA_DIR=/data)
  scheme=https
  for kv in "${environ[@]}"; do
    case "$kv" in
      BALDE_ADDR=*) over+=(BALDE_ADDR="127.0.0.1:$port"); scheme=http ;;
      BALDE_GATEWAY_ADDR=*) over+=(BALDE_GATEWAY_ADDR="127.0.0.1:$port") ;;
      BALDE_SIFEN_GATEWAY_ADDR=*) over+=(BALDE_SIFEN_GATEWAY_ADDR="127.0.0.1:$port") ;;
    esac
  done
  env -i PATH="$PATH" "${environ[@]}" "${over[@]}" \
    chroot --userspec=65532:65532 "$root" /usr/local/bin/balde "${cmd[@]}" >"$work/compose-$name.log" 2>&1 &
  pids+=($!)
  ready "compose-$name" "$scheme://127.0.0.1:$port" "$!"
  case "$name" in
    gateway-dict) clientsOnly "compose-$name" "https://127.0.0.1:$port" "/api/v2/policies/" ;;
    gateway-sifen) clientsOnly "compose-$name" "https://127.0.0.1:$port" "/de/ws/consultas/consulta-ruc.wsdl" ;;
  esac
done < "$work/services"
echo "image-check: ok"
