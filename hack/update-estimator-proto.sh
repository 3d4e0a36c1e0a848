#!/usr/bin/env bash
# Regenerates the Go code of the replica estimator API (pkg/estimator/pb,
# pkg/estimator/service) from its .proto files. protoc comes from Debian's
# protobuf-compiler package; protoc-gen-go and protoc-gen-go-grpc are built
# from the versions pinned in hack/tools/proto. The output is committed, so
# builds need none of this.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
bin="$root/_output/tools"
mkdir -p "$bin"
(cd "$root/hack/tools/proto" && go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)
cd "$root/pkg"
PATH="$bin:$PATH" protoc -I . \
  --go_out=paths=source_relative:. \
  --go-grpc_out=paths=source_relative:. \
  estimator/pb/estimator.proto estimator/service/service.proto
