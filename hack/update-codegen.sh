#!/usr/bin/env bash
# Regenerates the deep copies of the plugins' args (zz_generated.deepcopy.go
# beside each types.go) with deepcopy-gen, built from the k8s.io/code-generator
# pinned in hack/tools/codegen at the version of the k8s.io modules in go.mod.
# The output is committed, so builds need none of this.
#
#   hack/update-codegen.sh          regenerate in place
#   hack/update-codegen.sh -check   fail if a committed file is not what
#                                   deepcopy-gen makes now; the tree is left
#                                   as it was (make verify runs this)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pkgs=(pkg/consolidation pkg/makeroom pkg/scheduler/loadaware pkg/scheduler/rebalancehint)
out=zz_generated.deepcopy.go
check=false
case "${1:-}" in
  "") ;;
  -check) check=true ;;
  *) echo "usage: $0 [-check]" >&2; exit 2 ;;
esac

bin="$root/_output/tools"
mkdir -p "$bin"
(cd "$root/hack/tools/codegen" && go build -o "$bin/" k8s.io/code-generator/cmd/deepcopy-gen)

cd "$root"
if $check; then
  saved="$(mktemp -d)"
  for p in "${pkgs[@]}"; do
    mkdir -p "$saved/$p"
    if [ -e "$p/$out" ]; then cp "$p/$out" "$saved/$p/$out"; fi
  done
  # Whatever happens, put the committed files back.
  restore() {
    for p in "${pkgs[@]}"; do
      if [ -e "$saved/$p/$out" ]; then cp "$saved/$p/$out" "$p/$out"; else rm -f "$p/$out"; fi
    done
    rm -rf "$saved"
  }
  trap restore EXIT
fi

# The repository's files carry no license header, so neither do these.
"$bin/deepcopy-gen" --go-header-file /dev/null --output-file "$out" "${pkgs[@]/#/./}"

if $check; then
  stale=()
  for p in "${pkgs[@]}"; do
    if ! cmp -s "$p/$out" "$saved/$p/$out"; then stale+=("$p/$out"); fi
  done
  if [ "${#stale[@]}" -gt 0 ]; then
    echo "verify: ${stale[*]} not what deepcopy-gen makes: run hack/update-codegen.sh" >&2
    exit 1
  fi
fi
