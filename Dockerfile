# Both binaries on a distroless, non-root base: /rebalancer (the entrypoint)
# and /rebalancer-scheduler (manifests/scheduler sets it as the command).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 make build VERSION=${VERSION}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/_output/bin/rebalancer /src/_output/bin/rebalancer-scheduler /
USER 65532:65532
ENTRYPOINT ["/rebalancer"]
