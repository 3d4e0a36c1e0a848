# syntax=docker/dockerfile:1
#
# For those who build with Docker. The released image is built in Go, without
# a Docker engine (`make image`, hack/tools/image); this Dockerfile produces
# the same filesystem layout: /rebalancer (the entrypoint) and
# /rebalancer-scheduler (manifests/scheduler sets it as the command), built by
# the same make target with the same flags; /etc/ssl/certs/ca-certificates.crt,
# /etc/passwd, /etc/group, /home/nonroot and /tmp (1777), written by the
# image tool itself (`image rootfs`); user 65532:65532; the same labels. Its
# layers and their times are Docker's, so its digest differs.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(git describe --tags) --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg BUILD_DATE=$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd) .

# Cross-compiles on the build machine's platform: the binaries are static Go.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY hack/tools/image/go.mod hack/tools/image/go.sum hack/tools/image/
RUN --mount=type=cache,target=/go/pkg/mod go mod download && cd hack/tools/image && go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev COMMIT=unknown BUILD_DATE=1970-01-01T00:00:00Z
# The build stage runs as root, so `image rootfs` gives /home/nonroot to
# 65532; COPY --from keeps the owners and modes of what it copies.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    make bin-${TARGETOS}_${TARGETARCH} VERSION=${VERSION} COMMIT=${COMMIT} BUILD_DATE=${BUILD_DATE} && \
    cd hack/tools/image && go run . rootfs -o /rootfs

FROM scratch
ARG TARGETOS TARGETARCH
ARG VERSION=dev COMMIT=unknown BUILD_DATE=1970-01-01T00:00:00Z
COPY --from=build /rootfs/ /
COPY --from=build /src/_output/bin/${TARGETOS}_${TARGETARCH}/ /
USER 65532:65532
ENTRYPOINT ["/rebalancer"]
LABEL org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${COMMIT} \
      org.opencontainers.image.created=${BUILD_DATE} \
      org.opencontainers.image.source=https://github.com/rebalancer-dev/rebalancer \
      org.opencontainers.image.licenses=Apache-2.0
