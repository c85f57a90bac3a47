# queen-node container image.
#
#   docker build -t queen-node:dev .
#   docker run --rm -p 127.0.0.1:6632:6632 -v queen-data:/data queen-node:dev
#
# One container is a complete single-node broker. For a cluster pass
# --node-id, --advertise-addr, --join and --bootstrap-expect (flags or the
# QUEEN_* env vars); see docker-compose.yml and deploy/k8s/.
#
# Build args: VERSION (stamped into main.version; the binary's own default
# otherwise), BASE_IMAGE (the final stage; must provide uid/gid 65532).

ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

# ---- build ------------------------------------------------------------------
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-s -w ${VERSION:+-X main.version=${VERSION}}" \
        -o /out/queen-node ./cmd/queen-node \
 && go build -trimpath -ldflags "-s -w" -o /out/queen-healthcheck ./deploy/healthcheck \
 && mkdir -p /out/data

# ---- run --------------------------------------------------------------------
# distroless/static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532); no shell, no package manager.
FROM ${BASE_IMAGE}
COPY --from=build /out/queen-node /out/queen-healthcheck /usr/local/bin/
# An empty /data owned by the non-root user: Docker copies it (with its
# owner) into a new named volume mounted there, so the node can write.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV QUEEN_DATA_DIR=/data \
    QUEEN_HTTP_ADDR=0.0.0.0:6632 \
    QUEEN_GRPC_ADDR=0.0.0.0:6633 \
    QUEEN_RAFT_ADDR=0.0.0.0:6634 \
    QUEEN_GOSSIP_ADDR=0.0.0.0:6635
VOLUME ["/data"]
# 6632 Queen HTTP API, 6633 gRPC, 6634 Raft, 6635 gossip (memberlist: TCP and UDP)
EXPOSE 6632/tcp 6633/tcp 6634/tcp 6635/tcp 6635/udp
# No shell in the image, so the health check is a small static binary
# (deploy/healthcheck) that GETs /health on $QUEEN_HTTP_ADDR: healthy on 200,
# unhealthy on 503 (no leader known) or no answer. Change the HTTP port with
# QUEEN_HTTP_ADDR rather than --http-addr, or the check probes the old port;
# likewise QUEEN_TLS_CERT rather than --tls-cert: with it set, the check
# speaks TLS and accepts only that certificate.
# Kubernetes ignores this and uses its own probes.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/queen-healthcheck"]
ENTRYPOINT ["/usr/local/bin/queen-node"]
