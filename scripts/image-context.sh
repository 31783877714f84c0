#!/bin/sh
# Stages the build context of the Dockerfile in $1 (default bin/image): the
# static binary, the host's CA bundle, /etc/passwd and /etc/group naming the
# image's user (balde, uid 65532) and an empty /data owned by it.
set -eu
out=${1:-bin/image}
version=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || { echo "image: $ca not found: install Debian's ca-certificates" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/etc" "$out/data"
CGO_ENABLED=0 ${GO:-go} build -trimpath -ldflags "-s -w -X main.Version=$version" -o "$out/balde" ./cmd/balde
cp "$ca" "$out/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nbalde:x:65532:65532:balde:/data:/sbin/nologin\n' > "$out/etc/passwd"
printf 'root:x:0:\nbalde:x:65532:\n' > "$out/etc/group"
echo "image: context in $out (balde $version, $(wc -c < "$out/balde") bytes)"
