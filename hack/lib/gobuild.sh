# shellcheck shell=bash
# go_build builds a binary the way the Makefile builds and tests everything
# (static, no build paths: CGO_ENABLED=0, -trimpath), so the Go build cache
# compiles each package once for the control planes, rebalancer's binaries
# and its tests.
go_build() { CGO_ENABLED=0 go build -trimpath "$@"; }
