#!/bin/bash
# Checks the image `make image` built (IMAGE, default localhost/balde:latest)
# the way the README's container example runs it, without a container
# runtime (none runs on these machines): the image's root file system is
# mounted by buildah and its binary started in it with chroot, as the image's
# user, on the host's loopback. It checks the image's user, entrypoint and CA
# bundle, then runs `balde gateway dict` with the README's variables against
# a DICT simulator and waits for /readyz. PostgreSQL (BALDE_TEST_POSTGRES_DSN,
# in a schema of its own) as in the README when it is set, else SQLite in
# the image's /data. Needs root (chroot) and buildah.
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
inimage() { chroot --userspec=65532:65532 "$root" /usr/local/bin/balde "$@"; }
version=$(inimage version) || fail "balde version did not run in the image"
echo "image-check: $image runs as $user: $version"

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
${GO:-go} build -o "$work/dictsim" ./cmd/dictsim
simport=$(freeport)
"$work/dictsim" --addr "127.0.0.1:$simport" --category A >"$work/dictsim.log" 2>&1 &
pids+=($!)

db="sqlite:///data/balde.db"
if [ -n "${BALDE_TEST_POSTGRES_DSN:-}" ] && command -v psql >/dev/null; then
  schema="image_check_$$"
  psql -q "$BALDE_TEST_POSTGRES_DSN" -c "CREATE SCHEMA $schema" >/dev/null
  sep='?'; case "$BALDE_TEST_POSTGRES_DSN" in *\?*) sep='&';; esac
  db="$BALDE_TEST_POSTGRES_DSN${sep}search_path=$schema"
fi
port=$(freeport)
# The README's `docker run … balde:latest gateway dict`, on loopback.
env -i PATH="$PATH" BALDE_DB="$db" BALDE_DICT_URL="http://127.0.0.1:$simport" BALDE_DICT_PARTICIPANT=99999004 \
  BALDE_GATEWAY_ADDR="127.0.0.1:$port" HOME=/data BALDE_DATA_DIR=/data \
  chroot --userspec=65532:65532 "$root" /usr/local/bin/balde gateway dict >"$work/gateway.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  if code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz") && [ "$code" = 200 ]; then
    echo "image-check: gateway dict from the image is ready on 127.0.0.1:$port (database ${db%%\?*})"
    exit 0
  fi
  kill -0 "${pids[1]}" 2>/dev/null || { cat "$work/gateway.log" >&2; fail "the gateway exited"; }
  sleep 0.2
done
cat "$work/gateway.log" >&2
fail "the gateway from the image was not ready within 20 s"
