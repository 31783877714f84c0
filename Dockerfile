# The balde image: the one static binary (pure Go, CGO_ENABLED=0), the CA
# certificates it needs to reach the DICT and SIFEN over TLS, and a non-root
# user. Nothing else: no shell, no package manager.
#
# Build it with `make image` (buildah, podman or docker; no daemon needed with
# buildah): it compiles bin/image/balde and stages the rest of the context in
# bin/image/ first. By hand: `make image-context && docker build -t balde:latest
# -f Dockerfile bin/image`.
#
# The image runs any balde command: `docker run localhost/balde:latest gateway
# dict` (with its clients file and TLS pair: README, "Gateways"), `… serve`,
# `… migrate up`; deploy/compose.yaml runs serve and both gateways on
# PostgreSQL. SQLite files and serve's generated admin password go to /data
# (a volume); with PostgreSQL nothing is written in the container.
FROM scratch
COPY etc/passwd etc/group /etc/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --chown=65532:65532 data/ /data/
COPY balde /usr/local/bin/balde
USER 65532:65532
WORKDIR /data
ENV HOME=/data BALDE_DATA_DIR=/data
VOLUME ["/data"]
ENTRYPOINT ["/usr/local/bin/balde"]
CMD ["--help"]
