#!/usr/bin/env bash
# Runs the live multi-cluster test (test/karmada, build tag karmadalive)
# against hack/karmada-cluster.sh's harness, started for it, and always
# stops the harness afterwards. Usage: hack/karmada-live.sh [go test timeout]
# ($KARMADA_LIVE_COUNT runs of each test, default 1).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
trap 'hack/karmada-cluster.sh down' EXIT
vars=$(hack/karmada-cluster.sh up)
eval "$vars"
# Karmada's build tag (its hack/build.sh): its estimator client's messages
# marshal only with it.
(cd test/karmada && go test -tags 'karmadalive kubernetes_protomessage_one_more_release' -count="${KARMADA_LIVE_COUNT:-1}" \
  -timeout "${1:-20m}" -v -run '^TestLive' .) 2>&1 | tee _output/karmada-live.log | grep -E '^ *(=== RUN|--- )|^(PASS|FAIL|ok|panic)|live_test'
exit "${PIPESTATUS[0]}"
