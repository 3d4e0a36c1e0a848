#!/usr/bin/env bash
# Compares Go benchmarks of a git revision with the working tree, with
# benchstat. Each package's test binary is built once from each tree, and the
# two are run in turn, one run each, COUNT times, so that a machine whose
# speed drifts slows both alike.
# Usage: hack/benchstat.sh BENCHSTAT BASE PATTERN BENCHTIME COUNT PKG...
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
benchstat=$1 base=$2 pattern=$3 benchtime=$4 count=$5
shift 5
[ $# -gt 0 ] || { echo "benchstat: no packages" >&2; exit 2; }
out=$ROOT/_output/benchstat
# The base runs in a worktree under $out, where pkg/openb's default path to
# the trace (relative to the repository) does not lead: name it for both.
export OPENB_DIR=${OPENB_DIR:-$(cd "$ROOT/.." && pwd)/shared/data/openb}
rev=$(git -C "$ROOT" rev-parse --verify "$base^{commit}")
git -C "$ROOT" worktree remove --force "$out/base" 2>/dev/null || true
rm -rf "$out"
mkdir -p "$out"
git -C "$ROOT" worktree add --quiet --detach "$out/base" "$rev"
trap 'git -C "$ROOT" worktree remove --force "$out/base"' EXIT

: >"$out/old.txt"
: >"$out/new.txt"
for pkg in "$@"; do
  dir=${pkg#./}
  dir=${dir%/}
  name=$(echo "$dir" | tr / _)
  (cd "$out/base" && go test -c -o "$out/$name.old.test" "./$dir")
  (cd "$ROOT" && go test -c -o "$out/$name.new.test" "./$dir")
  for i in $(seq "$count"); do
    echo "benchstat: $pkg run $i of $count" >&2
    # A test binary runs in its package's directory, as go test runs it.
    (cd "$out/base/$dir" && "$out/$name.old.test" -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime" -test.benchmem -test.count 1) >>"$out/old.txt"
    (cd "$ROOT/$dir" && "$out/$name.new.test" -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime" -test.benchmem -test.count 1) >>"$out/new.txt"
  done
done
echo "base: $base ($rev); new: the working tree" | tee "$out/benchstat.txt"
"$benchstat" "base=$out/old.txt" "new=$out/new.txt" | tee -a "$out/benchstat.txt"
