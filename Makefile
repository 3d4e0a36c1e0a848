# rebalancer — build, test and package.
#
#   make build      both binaries into _output/bin
#   make test       unit tests, Karmada's estimator client against
#                   `rebalancer estimator`, then the e2e suite against a real
#                   control plane that it starts and stops itself
#   make lint       golangci-lint (pinned in hack/tools/lint; see .golangci.yml),
#                   shellcheck
#   make verify     lint, go.mod tidy, the chart's copies the same as their
#                   sources: what CI checks before the tests
#   make image      the container image (needs a Docker engine)
#   make demo       rebalancer plan on an example cluster
#   make fuzz       every fuzz target for FUZZTIME (default 30s) each
#   make chart      copy policies/ and the RBAC files into manifests/helm/rebalancer
#   make bench      rebalancer beside the upstream descheduler: plans at 1,000
#                   and 5,000 nodes, predictions/s, RebalanceHint overhead,
#                   10 simulated rounds on the openb trace; writes
#                   bench-results.json (OPENB_DIR: the trace's CSVs)

SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/_output/bin
HELM := $(BIN)/helm
PROMTOOL := $(BIN)/promtool
PROMETHEUS := $(BIN)/prometheus
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE ?= rebalancer:$(VERSION)
# kube-scheduler's version strings, as the Kubernetes build sets them; version
# parsing clients fail on the bare module default.
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v1.36.1 \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
	-X k8s.io/client-go/pkg/version.gitVersion=v1.36.1 \
	-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36
LDFLAGS := -X github.com/rebalancer-dev/rebalancer/pkg/version.Version=$(VERSION) $(K8S_LDFLAGS)
E2E_TIMEOUT ?= 20m

.PHONY: all build test test-unit test-karmada test-e2e lint verify image demo bench fuzz chart cluster-up cluster-down clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/rebalancer ./cmd/rebalancer
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/rebalancer-scheduler ./cmd/rebalancer-scheduler

test: test-unit test-karmada test-e2e

# The plan must come out the same however often it is computed, and the
# simulation's forks must hold, also under the race detector.
test-unit:
	$(GO) test ./...
	$(GO) test -race -count=1 -run 'TestPlansAreReproducible|TestForkRevertCommit' ./pkg/planner ./pkg/simulator

# Karmada's own estimator client (karmada-scheduler's) against the built
# `rebalancer estimator`, in a module of its own (test/karmada).
test-karmada: build
	cd test/karmada && REBALANCER=$(BIN)/rebalancer $(GO) test -count=1 ./...

# Starts the control plane, runs the e2e suite, and stops the control plane
# whatever the outcome.
test-e2e: build $(HELM) $(PROMTOOL) $(PROMETHEUS)
	hack/e2e.sh $(E2E_TIMEOUT)

# helm, for the chart tests in the e2e suite, from its pinned module.
$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/helm && $(GO) build -o $(HELM) helm.sh/helm/v3/cmd/helm

# promtool, for the alert rule tests in the e2e suite, and the Prometheus
# server, the Prometheus provider of its load tests, from the Prometheus
# module.
$(PROMTOOL): hack/tools/prometheus/go.mod hack/tools/prometheus/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/prometheus && $(GO) build -o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

$(PROMETHEUS): hack/tools/prometheus/go.mod hack/tools/prometheus/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/prometheus && $(GO) build -o $(PROMETHEUS) github.com/prometheus/prometheus/cmd/prometheus

# The chart carries copies of the shipped policies, RBAC and monitoring
# files (Helm reads no file outside the chart): source:copy pairs, written by
# `make chart` and compared by `make verify`.
CHART_FILES := manifests/helm/rebalancer/files
CHART_COPIES := $(foreach f,$(filter-out policies/kustomization.yaml,$(wildcard policies/*.yaml)),$(f):$(CHART_FILES)/policies/$(notdir $(f))) \
	manifests/rebalancer/rbac.yaml:$(CHART_FILES)/rbac/rebalancer.yaml \
	manifests/scheduler/rbac.yaml:$(CHART_FILES)/rbac/scheduler.yaml \
	manifests/extender/rbac.yaml:$(CHART_FILES)/rbac/extender.yaml \
	manifests/estimator/rbac.yaml:$(CHART_FILES)/rbac/estimator.yaml \
	manifests/monitoring/dashboard.json:$(CHART_FILES)/monitoring/dashboard.json \
	manifests/monitoring/alerts.yaml:$(CHART_FILES)/monitoring/alerts.yaml

chart:
	@for pair in $(CHART_COPIES); do cp "$${pair%%:*}" "$${pair#*:}"; done

# golangci-lint is built from its pinned module, like the control plane, and
# rebuilt only when that pin changes.
LINT := $(BIN)/golangci-lint
$(LINT): hack/tools/lint/go.mod hack/tools/lint/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/lint && $(GO) build -o $(LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

lint: $(LINT)
	$(LINT) run ./...
	@if command -v shellcheck >/dev/null; then shellcheck hack/*.sh .ci/run; else echo "shellcheck not installed; skipped"; fi

verify: lint
	$(GO) mod tidy -diff
	cd test/karmada && $(GO) mod tidy -diff
	cd hack/tools/proto && $(GO) mod tidy -diff
	@for pair in $(CHART_COPIES); do cmp -s "$${pair%%:*}" "$${pair#*:}" || { echo "verify: $${pair#*:} differs from $${pair%%:*}: run make chart"; exit 1; }; done

image:
	docker build -t $(IMAGE) .

cluster-up:
	hack/local-cluster.sh up

cluster-down:
	hack/local-cluster.sh down

# The planner on an example cluster: a node under maintenance, thin nodes,
# a PDB, DaemonSets, a bare pod, kube-system pods.
demo: build
	$(BIN)/rebalancer plan --policy policies/binpacking-policy.yaml \
		--scheduler-config policies/binpacking-scheduler.yaml --snapshot test/testdata/demo-cluster.yaml

OPENB_DIR ?= ../shared/data/openb
bench:
	$(GO) run ./hack/bench -o bench-results.json -openb $(OPENB_DIR)

# Every fuzz target for FUZZTIME, one after another (go test -fuzz takes one
# target in one package). Crashers are saved under the package's
# testdata/fuzz/<target>/ and then run by plain go test.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/policy
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/profile
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/snapshot
	$(GO) test -run '^$$' -fuzz '^FuzzPeekType$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/snapshot
	$(GO) test -run '^$$' -fuzz '^FuzzFastYAML$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/snapshot
	$(GO) test -run '^$$' -fuzz '^FuzzFromPod$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/hint
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeArgs$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/scheduler/rebalancehint
	$(GO) test -run '^$$' -fuzz '^FuzzParseSchedule$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/daemon
	$(GO) test -run '^$$' -fuzz '^FuzzParseWindow$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/daemon
	$(GO) test -run '^$$' -fuzz '^FuzzDocument$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./internal/strictjson
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./internal/strictjson
	$(GO) test -run '^$$' -fuzz '^FuzzReadCSV$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/openb
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/history
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeArgs$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/extender
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeReview$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./pkg/webhook

clean:
	hack/local-cluster.sh down
	rm -rf _output
