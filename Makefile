# rebalancer — build, test and package.
#
#   make build      rebalancer, rebalancer-scheduler and
#                   rebalancer-karmada-scheduler into _output/bin
#   make test       unit tests, Karmada's estimator client against
#                   `rebalancer estimator`, the images' checks, the e2e suite
#                   against a real control plane, then Karmada's own
#                   components over two member clusters (test-karmada-live)
#                   and a 4-minute soak (test-soak); each control plane
#                   started and stopped by the target
#   make lint       golangci-lint (pinned in hack/tools/lint; see .golangci.yml),
#                   shellcheck
#   make verify     lint, go.mod tidy, the generated deep copies and the
#                   chart's copies the same as their sources: what CI checks
#                   before the tests
#   make image      the container images, built in Go (no Docker engine): OCI
#                   layouts for linux/amd64 and linux/arm64 in _output/image
#                   (rebalancer, rebalancer-scheduler) and
#                   _output/image-karmada-scheduler
#   make image-push IMAGE=registry.example.com/rebalancer:v0.1.0 \
#                   [KARMADA_SCHEDULER_IMAGE=registry.example.com/rebalancer-karmada-scheduler:v0.1.0]
#                   push them, with the Docker config's credentials
#   make test-image build and check the image for this machine's platform
#                   (TEST_IMAGE_PLATFORMS): user, files, the binaries;
#                   make release checks every platform
#   make release VERSION=vX.Y.Z
#                   binaries, image tarball, chart, SBOMs and SHA256SUMS in
#                   _output/release
#   make demo       rebalancer plan on an example cluster
#   make fuzz       every fuzz target for FUZZTIME (default 30s) each
#   make docs       regenerate docs/cli and docs/reference from the code
#   make chart      copy policies/ and the RBAC files into manifests/helm/rebalancer
#   make soak       rebalancer run, rebalancer-scheduler and the extender for
#                   SOAK_DURATION (default 30m) on SOAK_NODES (default 200)
#                   KWOK nodes of the local control plane under churn; a CSV,
#                   charts and pass/fail checks in _output/soak (not in test)
#   make scale      rebalancer plan and run --once on SCALE_NODES (default
#                   2000) KWOK nodes and SCALE_PODS (default 30000) pods of a
#                   local control plane of its own (its own ports and
#                   _output/scale-cluster): time to the first plan, peak
#                   memory of each process, the extender's latency under a
#                   burst of 1,000 pods; a table and _output/scale/scale.json
#                   (not in test; 12 minutes on 2 shared cores, each
#                   --rounds more about 6)
#   make bench      rebalancer beside the upstream descheduler: plans at 1,000
#                   to 50,000 nodes (BENCH_MAX_NODES caps them; upstream up
#                   to 5,000), each the median of BENCH_RUNS runs (default 3),
#                   predictions/s, RebalanceHint overhead, 10 simulated rounds
#                   on the openb trace, the import rate of a 1,000,000-pod
#                   list generated from the trace's; writes bench-results.json
#                   (OPENB_DIR: the trace's CSVs)
#   make benchstat  Go benchmarks of BENCH_BASE (default HEAD) against the
#                   working tree, with benchstat (BENCH, BENCH_PKGS,
#                   BENCH_TIME, BENCH_COUNT); _output/benchstat/benchstat.txt

SHELL := /usr/bin/env bash
GO ?= go
# Every build and test here compiles as the release does (static, no build
# paths), as hack/local-cluster.sh builds the control plane: the Go
# build cache then compiles each package once for them all. The race
# detector alone needs cgo.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(shell $(GO) env GOFLAGS)
BIN := $(CURDIR)/_output/bin
HELM := $(BIN)/helm
BENCHSTAT := $(BIN)/benchstat
PROMTOOL := $(BIN)/promtool
PROMETHEUS := $(BIN)/prometheus
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
# The commit's time, not the clock's: two builds of one commit are the same.
BUILD_DATE ?= $(shell TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD 2>/dev/null)
# Each read once: a commit landing mid-build must not give the binaries of
# one build two versions.
VERSION := $(VERSION)
COMMIT := $(COMMIT)
BUILD_DATE := $(BUILD_DATE)
IMAGE ?= rebalancer:$(VERSION)
# kube-scheduler's version strings, as the Kubernetes build sets them, from
# the k8s.io/kubernetes version go.mod pins; version parsing clients fail on
# the bare module default.
K8S_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION)))
K8S_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(K8S_MINOR))
PKG_VERSION := github.com/rebalancer-dev/rebalancer/pkg/version
LDFLAGS := -X $(PKG_VERSION).Version=$(VERSION) -X $(PKG_VERSION).Commit=$(COMMIT) \
	-X $(PKG_VERSION).BuildDate=$(BUILD_DATE) $(K8S_LDFLAGS)
E2E_TIMEOUT ?= 20m

.PHONY: docs all build test test-unit test-karmada test-image test-e2e lint verify image image-push release demo bench fuzz chart cluster-up cluster-down clean

all: build

# The host's binaries, built as the image's are (bin-<os>_<arch> below):
# one compilation serves both.
HOST_PLATFORM := $(shell $(GO) env GOOS)_$(shell $(GO) env GOARCH)
build: bin-$(HOST_PLATFORM) bin-karmada-$(HOST_PLATFORM)
	@for b in rebalancer rebalancer-scheduler; do rm -f $(BIN)/$$b && cp $(BIN)/$(HOST_PLATFORM)/$$b $(BIN)/; done
	@rm -f $(BIN)/rebalancer-karmada-scheduler && cp $(BIN)/karmada-$(HOST_PLATFORM)/rebalancer-karmada-scheduler $(BIN)/

test: test-unit test-karmada test-image test-e2e test-karmada-live test-soak

# The plan must come out the same however often it is computed, and the
# simulation's forks must hold, also under the race detector.
test-unit:
	$(GO) test -timeout 30m ./...
	cd $(KARMADA_SCHEDULER) && $(GO) test -tags $(KARMADA_TAGS) ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 -run 'TestPlansAreReproducible|TestForkRevertCommit' ./pkg/planner ./pkg/simulator

# Karmada's own estimator client (karmada-scheduler's) against the built
# `rebalancer estimator`, in a module of its own (test/karmada), with the
# build tag Karmada builds with: without it, the Kubernetes types inside its
# estimator client's gRPC messages do not marshal (rebalancer-karmada-scheduler
# is built with it too).
KARMADA_TAGS := kubernetes_protomessage_one_more_release
test-karmada: build
	cd test/karmada && REBALANCER=$(BIN)/rebalancer $(GO) test -tags $(KARMADA_TAGS) -count=1 ./...

# Karmada's real components over two member control planes, each member
# with its own `rebalancer estimator` (hack/karmada-cluster.sh): Karmada
# divides replicas by their answers, and rebalancer-karmada-scheduler's
# score chooses the member. About 2 minutes, and a few more the first time
# Karmada's components are built; the harness is stopped whatever the
# outcome.
.PHONY: test-karmada-live
test-karmada-live: build
	REBALANCER_KARMADA_SCHEDULER=$(BIN)/rebalancer-karmada-scheduler hack/karmada-live.sh

# Starts the control plane, runs the e2e suite, and stops the control plane
# whatever the outcome.
test-e2e: build $(HELM) $(PROMTOOL) $(PROMETHEUS)
	hack/e2e.sh $(E2E_TIMEOUT)

# Against the previous Kubernetes minor (1.35), not part of test: docs/compatibility.md.
.PHONY: test-compat
test-compat: build
	hack/compat.sh $(E2E_TIMEOUT)

# helm, for the chart tests in the e2e suite, from its pinned module.
$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/helm && $(GO) build -o $(HELM) helm.sh/helm/v3/cmd/helm

# promtool, for the alert rule tests in the e2e suite, and the Prometheus
# server, the Prometheus provider of its load tests, from the Prometheus
# module. The tests scrape static targets: remove_all_sd leaves out the
# cloud service discoveries (file and HTTP stay), a third of the packages.
$(PROMTOOL): hack/tools/prometheus/go.mod hack/tools/prometheus/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/prometheus && $(GO) build -tags remove_all_sd -o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

$(PROMETHEUS): hack/tools/prometheus/go.mod hack/tools/prometheus/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/prometheus && $(GO) build -tags remove_all_sd -o $(PROMETHEUS) github.com/prometheus/prometheus/cmd/prometheus

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

# The reference pages whose source is the code: docs/cli (the command line)
# and docs/reference (labels and annotations, skip reasons, metrics).
docs:
	$(GO) run ./hack/gendocs

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
	cd $(KARMADA_SCHEDULER) && $(LINT) run --build-tags $(KARMADA_TAGS) ./...
	@if command -v shellcheck >/dev/null; then shellcheck -x hack/*.sh hack/lib/*.sh .ci/run; else echo "shellcheck not installed; skipped"; fi

verify: lint
	$(GO) run ./hack/gendocs -check
	hack/update-codegen.sh -check
	$(GO) mod tidy -diff
	cd test/karmada && $(GO) mod tidy -diff
	cd $(KARMADA_SCHEDULER) && $(GO) mod tidy -diff
	cd hack/tools/proto && $(GO) mod tidy -diff
	cd hack/tools/image && $(GO) mod tidy -diff
	cd hack/tools/sbom && $(GO) mod tidy -diff
	cd hack/tools/k8s-prev && $(GO) mod tidy -diff
	cd hack/tools/karmada && $(GO) mod tidy -diff
	cd hack/tools/codegen && $(GO) mod tidy -diff
	cd hack/tools/benchstat && $(GO) mod tidy -diff
	@for pair in $(CHART_COPIES); do cmp -s "$${pair%%:*}" "$${pair#*:}" || { echo "verify: $${pair#*:} differs from $${pair%%:*}: run make chart"; exit 1; }; done

# Static binaries without build paths for one platform, bin-<os>_<arch>,
# into $(BIN)/<os>_<arch>/: what the image, the release and the Dockerfile
# ship. The commit and date come from LDFLAGS, so no VCS stamp
# (-buildvcs=false): a build from a clone, a dirty tree or the Dockerfile's
# context (no .git) is then the same. Always run; go build knows what is
# stale.
CMDS := ./cmd/rebalancer ./cmd/rebalancer-scheduler
BIN_TARGETS := bin-linux_amd64 bin-linux_arm64 bin-darwin_arm64
.PHONY: $(BIN_TARGETS)
$(BIN_TARGETS): bin-%:
	CGO_ENABLED=0 GOOS=$(word 1,$(subst _, ,$*)) GOARCH=$(word 2,$(subst _, ,$*)) \
		$(GO) build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)" -o $(BIN)/$*/ $(CMDS)

# rebalancer-karmada-scheduler, a module of its own (Karmada pins its own
# Kubernetes versions), into $(BIN)/karmada-<os>_<arch>/ (released for Linux). It
# reports Karmada's version with rebalancer's as build metadata.
KARMADA_SCHEDULER := cmd/rebalancer-karmada-scheduler
KARMADA_VERSION := $(shell cd $(KARMADA_SCHEDULER) && $(GO) list -m -f '{{.Version}}' github.com/karmada-io/karmada)
KARMADA_SCHEDULER_VERSION := $(KARMADA_VERSION)+rebalancer.$(VERSION)
KARMADA_LDFLAGS := $(foreach kv,gitVersion=$(KARMADA_SCHEDULER_VERSION) gitCommit=$(COMMIT) buildDate=$(BUILD_DATE),\
	-X github.com/karmada-io/karmada/pkg/version.$(kv))
KARMADA_BIN_TARGETS := bin-karmada-linux_amd64 bin-karmada-linux_arm64 bin-karmada-darwin_arm64
.PHONY: $(KARMADA_BIN_TARGETS)
$(KARMADA_BIN_TARGETS): bin-karmada-%:
	cd $(KARMADA_SCHEDULER) && CGO_ENABLED=0 GOOS=$(word 1,$(subst _, ,$*)) GOARCH=$(word 2,$(subst _, ,$*)) \
		$(GO) build -trimpath -buildvcs=false -tags $(KARMADA_TAGS) -ldflags "$(KARMADA_LDFLAGS)" -o $(BIN)/karmada-$*/ .

# The image tool (hack/tools/image): builds, pushes and archives the image
# with go-containerregistry.
IMAGE_TOOL := $(BIN)/image
$(IMAGE_TOOL): $(wildcard hack/tools/image/*.go) hack/tools/image/go.mod hack/tools/image/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/image && $(GO) build -o $(IMAGE_TOOL) .

# The image, FROM-scratch style: both binaries, Mozilla's CA roots (from a
# pinned Go module, not this machine), passwd and group naming nonroot
# 65532, /tmp; user 65532:65532, entrypoint /rebalancer. One index for
# IMAGE_PLATFORMS in the OCI layout IMAGE_LAYOUT, and nothing else there.
# Every time in it is BUILD_DATE, so one commit gives one digest.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_LAYOUT := $(CURDIR)/_output/image
KARMADA_IMAGE_LAYOUT := $(CURDIR)/_output/image-karmada-scheduler
image: $(IMAGE_TOOL) $(addprefix bin-,$(subst /,_,$(IMAGE_PLATFORMS))) $(addprefix bin-karmada-,$(subst /,_,$(IMAGE_PLATFORMS)))
	$(IMAGE_TOOL) build $(foreach p,$(IMAGE_PLATFORMS),-platform $(p)=$(BIN)/$(subst /,_,$(p))) \
		-version "$(VERSION)" -revision "$(COMMIT)" -created "$(BUILD_DATE)" -o $(IMAGE_LAYOUT)
	$(IMAGE_TOOL) build $(foreach p,$(IMAGE_PLATFORMS),-platform $(p)=$(BIN)/karmada-$(subst /,_,$(p))) \
		-binaries rebalancer-karmada-scheduler \
		-version "$(VERSION)" -revision "$(COMMIT)" -created "$(BUILD_DATE)" -o $(KARMADA_IMAGE_LAYOUT)

# Pushes the layout `make image` wrote, with the credentials `docker login`
# or a credential helper keeps in the Docker config; no Docker engine. With
# KARMADA_SCHEDULER_IMAGE, the rebalancer-karmada-scheduler image too.
image-push: $(IMAGE_TOOL)
	@if [ "$(origin IMAGE)" = file ]; then \
		echo "image-push: say where, e.g. make image-push IMAGE=registry.example.com/rebalancer:$(VERSION)"; exit 1; fi
	$(IMAGE_TOOL) push -layout $(IMAGE_LAYOUT) -image $(IMAGE)
	$(if $(KARMADA_SCHEDULER_IMAGE),$(IMAGE_TOOL) push -layout $(KARMADA_IMAGE_LAYOUT) -image $(KARMADA_SCHEDULER_IMAGE))

# The built image's checks (TestBuiltImage: platforms, config, files, the
# binaries of this machine's platform run, the others are ELF of their
# architecture) and the image tool's own tests (a push to an in-process
# registry among them). The image of TEST_IMAGE_PLATFORMS: this machine's
# platform in `make test`, every one of IMAGE_PLATFORMS in `make release`.
TEST_IMAGE_PLATFORMS ?= linux/$(lastword $(subst _, ,$(HOST_PLATFORM)))
test-image:
	$(MAKE) image IMAGE_PLATFORMS="$(TEST_IMAGE_PLATFORMS)"
	cd hack/tools/image && TEST_IMAGE_LAYOUT=$(IMAGE_LAYOUT) TEST_IMAGE_BINARIES=rebalancer,rebalancer-scheduler \
		TEST_IMAGE_PLATFORMS="$(TEST_IMAGE_PLATFORMS)" \
		TEST_IMAGE_VERSION="$(VERSION)" TEST_IMAGE_REVISION="$(COMMIT)" TEST_IMAGE_CREATED="$(BUILD_DATE)" \
		TEST_IMAGE_UPSTREAM=$(K8S_VERSION) $(GO) test -count=1 ./...
	cd hack/tools/image && TEST_IMAGE_LAYOUT=$(KARMADA_IMAGE_LAYOUT) TEST_IMAGE_BINARIES=rebalancer-karmada-scheduler \
		TEST_IMAGE_PLATFORMS="$(TEST_IMAGE_PLATFORMS)" \
		TEST_IMAGE_VERSION="$(VERSION)" TEST_IMAGE_REVISION="$(COMMIT)" TEST_IMAGE_CREATED="$(BUILD_DATE)" \
		TEST_IMAGE_UPSTREAM="$(KARMADA_SCHEDULER_VERSION)" $(GO) test -count=1 -run TestBuiltImage ./...

# cyclonedx-gomod, for the release's SBOMs, from its pinned module.
SBOM := $(BIN)/cyclonedx-gomod
$(SBOM): hack/tools/sbom/go.mod hack/tools/sbom/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/sbom && $(GO) build -o $(SBOM) github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

# make release VERSION=vX.Y.Z[-pre]: into RELEASE, the binaries as
# <name>-<os>-<arch> (darwin too: both build there, though the scheduler is
# meant for Linux), the image as an OCI layout tarball, the Helm chart, a
# CycloneDX SBOM of each binary, and SHA256SUMS of them all. The VERSION is
# checked before anything is built.
# The SBOMs (<binary>.cdx.json) are read from the module list Go records in
# each binary, with the standard library (-std, for vulnerability
# scanners); no serial number or timestamp, so a rebuild is the same; no
# license detection, which would fetch modules, the release's own among
# them. GOOS and GOARCH: cyclonedx-gomod takes the package URLs' from
# `go env`, not from the binary.
RELEASE := $(CURDIR)/_output/release
RELEASE_BINARIES := $(foreach p,linux_amd64 linux_arm64 darwin_arm64,$(p)/rebalancer $(p)/rebalancer-scheduler) \
	$(foreach p,linux_amd64 linux_arm64,karmada-$(p)/rebalancer-karmada-scheduler)
ifneq ($(filter release,$(MAKECMDGOALS)),)
ifeq ($(shell echo '$(VERSION)' | grep -Ex 'v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?'),)
$(error release: VERSION "$(VERSION)" is not a semver tag vX.Y.Z or vX.Y.Z-pre: make release VERSION=v0.1.0)
endif
endif
release: bin-darwin_arm64 $(HELM) $(SBOM)
	$(MAKE) test-image TEST_IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)"
	rm -rf $(RELEASE) && mkdir -p $(RELEASE)
	@set -e; for b in $(RELEASE_BINARIES); do \
		p=$${b%/*}; p=$${p#karmada-}; out=$(RELEASE)/$${b#*/}-$${p/_/-}; \
		echo "$$out $$out.cdx.json"; cp $(BIN)/$$b $$out; \
		GOOS=$${p%_*} GOARCH=$${p#*_} $(SBOM) bin -json -std -noserial -notimestamp \
			-version $(VERSION) -output $$out.cdx.json $$out; \
	done
	$(IMAGE_TOOL) tar -C $(IMAGE_LAYOUT) -created "$(BUILD_DATE)" -o $(RELEASE)/rebalancer-image-$(VERSION).oci.tar
	$(IMAGE_TOOL) tar -C $(KARMADA_IMAGE_LAYOUT) -created "$(BUILD_DATE)" -o $(RELEASE)/rebalancer-karmada-scheduler-image-$(VERSION).oci.tar
	$(HELM) package manifests/helm/rebalancer --version $(VERSION:v%=%) --app-version $(VERSION) -d $(RELEASE)
	cd $(RELEASE) && sha256sum -- * > SHA256SUMS

cluster-up:
	hack/local-cluster.sh up

cluster-down:
	hack/local-cluster.sh down

# The planner on an example cluster: a node under maintenance, thin nodes,
# a PDB, DaemonSets, a bare pod, kube-system pods.
demo: build
	$(BIN)/rebalancer plan --policy policies/binpacking-policy.yaml \
		--scheduler-config policies/binpacking-scheduler.yaml --snapshot test/testdata/demo-cluster.yaml

# Starts the local control plane unless one answers, and stops what it
# started; SOAK_ARGS passes more flags (go run ./hack/soak -h).
SOAK_DURATION ?= 30m
SOAK_NODES ?= 200
SOAK_ARGS ?=
.PHONY: soak
soak: build
	$(GO) run ./hack/soak -duration $(SOAK_DURATION) -nodes $(SOAK_NODES) $(SOAK_ARGS)

# make test's short soak: every check of make soak, 4 minutes on 40 nodes.
.PHONY: test-soak
test-soak: build
	$(GO) run ./hack/soak -duration 4m -nodes 40 -out $(CURDIR)/_output/test-soak

# Starts its own control plane (hack/local-cluster.sh with CLUSTER_DIR
# _output/scale-cluster and ports of their own) unless one answers there, and
# stops what it started; SCALE_ARGS passes more flags (go run ./hack/scale -h).
SCALE_NODES ?= 2000
SCALE_PODS ?= 30000
SCALE_ARGS ?=
.PHONY: scale
scale: build
	$(GO) run ./hack/scale -nodes $(SCALE_NODES) -pods $(SCALE_PODS) $(SCALE_ARGS)

OPENB_DIR ?= ../shared/data/openb
BENCH_RUNS ?= 3
BENCH_MAX_NODES ?= 0
bench:
	$(GO) run ./hack/bench -o bench-results.json -openb $(OPENB_DIR) -runs $(BENCH_RUNS) -max-nodes $(BENCH_MAX_NODES)

# Go benchmarks of BENCH_BASE (a git revision, default HEAD) against the
# working tree, compared by benchstat (pinned in hack/tools/benchstat): each
# package's two test binaries run in turn BENCH_COUNT times; the result is in
# _output/benchstat/benchstat.txt. docs/benchmarks.md lists the benchmarks.
BENCH_BASE ?= HEAD
BENCH ?= Predict
BENCH_PKGS ?= ./pkg/simulator/
BENCH_TIME ?= 200x
BENCH_COUNT ?= 10
.PHONY: benchstat
benchstat: $(BENCHSTAT)
	hack/benchstat.sh $(BENCHSTAT) $(BENCH_BASE) '$(BENCH)' $(BENCH_TIME) $(BENCH_COUNT) $(BENCH_PKGS)

$(BENCHSTAT): hack/tools/benchstat/go.mod hack/tools/benchstat/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/benchstat && $(GO) build -o $(BENCHSTAT) golang.org/x/perf/cmd/benchstat

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
