# Talon: Cluster API providers for Talos Linux.
#
# Every tool comes from the Go module proxy at a version pinned in hack/tools/**/go.mod and is
# built once into a cache keyed by its pins (hack/tools/cache.sh), then linked into bin/; later
# runs and fresh clones reuse it until its pins change.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath .)

# One compile configuration for every build, test, lint run and tool: no cgo (nothing here
# needs it) and trimmed paths, so the dependency tree is compiled once and every step after
# the first reuses Go's build cache.
export CGO_ENABLED := 0
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(GOFLAGS)))
BIN := $(ROOT)/bin
OUT := $(ROOT)/out
PROVIDERS := bootstrap controlplane infrastructure

GIT_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X github.com/talon-capi/talon/internal/version.gitVersion=$(GIT_VERSION) \
	-X github.com/talon-capi/talon/internal/version.gitCommit=$(GIT_COMMIT) \
	-X github.com/talon-capi/talon/internal/version.buildDate=$(BUILD_DATE)

# The version of the clusterctl local repository release-manifests writes: the nextVersion
# of clusterctl-settings.json.
RELEASE_VERSION ?= v0.1.99

IMAGE_REGISTRY ?= ghcr.io/talon-capi
IMAGE_TAG ?= dev
# The node simulator image (docs/sim.md), run by the Docker provider in place of Talos.
SIM_IMAGE ?= $(IMAGE_REGISTRY)/talon-sim:$(IMAGE_TAG)

# The layers a test run must not skip (see docs/development.md).
TALON_REQUIRE ?= envtest,docker,e2e,netns,qemu,talosctl,kubelet,browser
# A package's limit: the control plane's package alone runs about 40 minutes of tests on 2 cores.
TEST_TIMEOUT ?= 60m

CONTROLLER_GEN := $(BIN)/controller-gen
KUSTOMIZE := $(BIN)/kustomize
GOTESTSUM := $(BIN)/gotestsum
GOLANGCI_LINT := $(BIN)/golangci-lint
KUBE_APISERVER := $(BIN)/kube-apiserver
KUBE_CONTROLLER_MANAGER := $(BIN)/kube-controller-manager
# The node of the kubelet-run management plane (internal/plane, docs/development.md).
KUBE_SCHEDULER := $(BIN)/kube-scheduler
KUBELET := $(BIN)/kubelet
KUBE_PROXY := $(BIN)/kube-proxy
CRI_DOCKERD := $(BIN)/cri-dockerd
PAUSE_IMAGE ?= $(IMAGE_REGISTRY)/talon-pause:$(IMAGE_TAG)
# Helm, pinned in hack/tools/helm/go.mod; it renders cert-manager's install manifest.
HELM := $(BIN)/helm
ETCD := $(BIN)/etcd
CLUSTERCTL := $(BIN)/clusterctl
CAPI_MANAGER := $(BIN)/cluster-api-manager
# The image name of Cluster API's core manager in its releases (release-manifests writes it
# into core-components.yaml, with the release's pull policy IfNotPresent; docker-build
# builds it from $(CAPI_MANAGER)).
CAPI_IMAGE_NAME := registry.k8s.io/cluster-api/cluster-api-controller
TALOSCTL := $(BIN)/talosctl
# A second Kubernetes minor, for simulated nodes configured for it (docs/sim.md).
KUBE_NEXT_APISERVER := $(BIN)/v1.37/kube-apiserver
KUBE_NEXT_CONTROLLER_MANAGER := $(BIN)/v1.37/kube-controller-manager
# The minor before the pinned one, for upgrades chained across minors (v1.35 → v1.36 → v1.37).
KUBE_PREV_APISERVER := $(BIN)/v1.35/kube-apiserver
KUBE_PREV_CONTROLLER_MANAGER := $(BIN)/v1.35/kube-controller-manager
# Sidero Labs' providers (CABPT, CACPPT): the reference Talon is measured against and migrates
# from (docs/migrate-from-sidero.md), pinned in hack/tools/sidero/go.mod.
SIDERO_BOOTSTRAP_MANAGER := $(BIN)/sidero-bootstrap-manager
SIDERO_CONTROLPLANE_MANAGER := $(BIN)/sidero-controlplane-manager
# The S3 server the etcd backup tests write to (Versity's gateway, POSIX backend), pinned in
# hack/tools/versitygw/go.mod.
VERSITYGW := $(BIN)/versitygw
SIDERO_BOOTSTRAP_MODULE := github.com/siderolabs/cluster-api-bootstrap-provider-talos
SIDERO_CONTROLPLANE_MODULE := github.com/siderolabs/cluster-api-control-plane-provider-talos
TOOLS := $(CONTROLLER_GEN) $(KUSTOMIZE) $(GOTESTSUM) $(GOLANGCI_LINT) $(KUBE_APISERVER) \
	$(KUBE_CONTROLLER_MANAGER) $(ETCD) $(CLUSTERCTL) $(CAPI_MANAGER) $(TALOSCTL) \
	$(KUBE_NEXT_APISERVER) $(KUBE_NEXT_CONTROLLER_MANAGER) $(KUBE_PREV_APISERVER) $(KUBE_PREV_CONTROLLER_MANAGER) \
	$(SIDERO_BOOTSTRAP_MANAGER) $(SIDERO_CONTROLPLANE_MANAGER) $(VERSITYGW) \
	$(KUBE_SCHEDULER) $(KUBELET) $(KUBE_PROXY) $(CRI_DOCKERD) $(HELM)
# The pinned Kubernetes version: the plane's, envtest's and a simulated node's by default.
KUBE_VERSION = $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2 }' hack/tools/kubernetes/go.mod)
# The Kubernetes version of the quickstart's cluster: the pinned one, whose binaries the plane
# runs anyway. A v1.37 version builds that minor's binaries into the simulator image too.
QUICKSTART_KUBERNETES ?= $(KUBE_VERSION)
QUICKSTART_NEXT_MINOR = $(findstring v1.37.,$(QUICKSTART_KUBERNETES))
# What talon up needs (make quickstart): kustomize for the manifests; etcd, kube-apiserver and
# kube-controller-manager for the plane and the simulated nodes; clusterctl and Cluster API's
# manager.
QUICKSTART_TOOLS = $(KUSTOMIZE) $(ETCD) $(KUBE_APISERVER) $(KUBE_CONTROLLER_MANAGER) $(CLUSTERCTL) $(CAPI_MANAGER) \
	$(if $(QUICKSTART_NEXT_MINOR),$(KUBE_NEXT_APISERVER) $(KUBE_NEXT_CONTROLLER_MANAGER))
# What a kubelet-run plane adds (talon up --managers pods): its node's binaries, and Helm,
# which renders cert-manager's install manifest.
POD_TOOLS := $(KUBE_SCHEDULER) $(KUBELET) $(KUBE_PROXY) $(CRI_DOCKERD) $(HELM)

##@ General

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: quickstart
quickstart: $(QUICKSTART_TOOLS) build release-manifests $(if $(findstring pods,$(QUICKSTART_ARGS)),$(POD_TOOLS) pause-image docker-build cert-manager) ## Start a local management plane with a 1 + 2 Talos cluster (talon up; talon down removes it) at QUICKSTART_KUBERNETES; QUICKSTART_ARGS="--managers pods" builds the pieces of a kubelet-run plane too
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory sim-image SIM_NEXT_MINOR=$(QUICKSTART_NEXT_MINOR); fi
	$(BIN)/talon up --kubernetes-version $(QUICKSTART_KUBERNETES) $(QUICKSTART_ARGS)

.PHONY: generate
generate: $(CONTROLLER_GEN) $(KUSTOMIZE) ## Generate deep copies, CRDs and RBAC roles from the Go sources, and the Helm chart's copies of them
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	@for p in $(PROVIDERS); do \
		rm -f config/$$p/crd/bases/*.yaml; \
		$(CONTROLLER_GEN) crd paths=./api/$$p/... output:crd:dir=config/$$p/crd/bases; \
		$(CONTROLLER_GEN) rbac:roleName=manager-role paths="{./internal/manager/...,./$$p/...}" output:rbac:dir=config/$$p/rbac; \
		$(CONTROLLER_GEN) webhook paths=./$$p/... output:webhook:dir=config/$$p/webhook; \
		echo "Generated CRDs and RBAC of the $$p provider"; \
	done
	@# The optional KubernetesCluster API (config/kubernetescluster, docs/kubernetescluster.md).
	rm -f config/kubernetescluster/bases/*.yaml
	$(CONTROLLER_GEN) crd paths=./api/vitistack/... output:crd:dir=config/kubernetescluster/bases
	gofmt -s -w api internal cmd bootstrap controlplane infrastructure test hack/chart
	@# The Helm chart's copies of the kustomize output (every object but the Deployments).
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
		$(KUSTOMIZE) build config/bootstrap/default > $$tmp/bootstrap.yaml; \
		$(KUSTOMIZE) build config/controlplane/default > $$tmp/control-plane.yaml; \
		$(KUSTOMIZE) build config/infrastructure/metal-only > $$tmp/infrastructure.yaml; \
		$(KUSTOMIZE) build config/controlplane/extension > $$tmp/in-place-updates.yaml; \
		go run ./hack/chart -chart charts/talon bootstrap=$$tmp/bootstrap.yaml control-plane=$$tmp/control-plane.yaml \
			infrastructure=$$tmp/infrastructure.yaml in-place-updates=$$tmp/in-place-updates.yaml; \
		echo "Generated the Helm chart's templates from the kustomize output"
	$(KUSTOMIZE) build addons/local-path-provisioner | go run ./hack/addons -name local-path-provisioner \
		-title "Rancher's local-path-provisioner (the default StorageClass, local-path)" > templates/addon-local-path-provisioner.yaml
	@echo "Generated the addons' ClusterResourceSets"

.PHONY: verify-gen
verify-gen: $(CONTROLLER_GEN) $(KUSTOMIZE) ## Fail if "make generate" would change any file
	@sum() { find api config internal cmd bootstrap controlplane infrastructure test charts templates addons -type f | sort | xargs sha256sum; }; \
	before=$$(sum); $(MAKE) --no-print-directory generate >/dev/null; after=$$(sum); \
	if [ "$$before" != "$$after" ]; then \
		diff <(echo "$$before") <(echo "$$after") || true; \
		echo "Generated files were out of date; 'make generate' has now rewritten them: review and commit."; exit 1; \
	fi; echo "Generated files are up to date"

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint
	$(GOLANGCI_LINT) run ./...

.PHONY: build
build: ## Build the three managers and the talon CLI into bin/
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

.PHONY: tools
tools: $(TOOLS) ## Build every pinned tool and management-plane binary into bin/

##@ Test

.PHONY: test
test: ## Run verify-gen, lint and every test (the CI entry point), then print each phase's time and CPU, the packages' and the 20 slowest tests' times (hack/test.sh)
	@MAKE="$(MAKE)" OUT="$(OUT)" TALON_REQUIRE="$(TALON_REQUIRE)" bash hack/test.sh

.PHONY: test-deps
test-deps: ## Install the Debian packages the bare-metal tests need (QEMU, iPXE, OVMF, dnsmasq), if missing
	@bash hack/install-test-deps.sh || echo "Could not install the test packages: the qemu, netns and browser layers cannot run (they fail when in TALON_REQUIRE)"

# The order test packages start in. go test runs as many test binaries at once as there are
# cores, starting them in the order they are named: the control plane's package and the
# end-to-end suite first (the two long chains), the deployed tests after the end-to-end suite,
# then every other package longest first as hack/test-times.txt (the last measured run's
# out/test-times.txt) has them. internal/plane comes last: its kubelet-run plane waits for the
# one the end-to-end and deployed tests hold (one per Docker Engine), and would keep a core
# idle while it waits.
SLOW_TEST_PACKAGES := $(addprefix github.com/talon-capi/talon/,controlplane/reconcilers/taloscontrolplane test/e2e test/deployed)
LAST_TEST_PACKAGES := github.com/talon-capi/talon/internal/plane
# Every test event of the last run (go test -json), read by hack/testreport and hack/testfailures.
TEST_JSON := $(OUT)/test-events.json

.PHONY: test-go
test-go: $(TOOLS) build $(if $(findstring docker,$(TALON_REQUIRE)),sim-image) $(if $(findstring kubelet,$(TALON_REQUIRE)),pause-image docker-build sidero-images cert-manager) ## Run the Go tests with gotestsum, the longest packages first, then list the ones that failed
	@mkdir -p $(OUT)
	@# The end-to-end and deployed tests run this build's programs from bin/ (test/clusters.Programs).
	packages=$$(go run ./hack/testreport -order hack/test-times.txt $$(go list ./... | grep -vxF $(addprefix -e ,$(SLOW_TEST_PACKAGES) $(LAST_TEST_PACKAGES)))); \
	KUBEBUILDER_ASSETS=$(BIN) TALON_PROGRAMS_DIR=$(BIN) TALON_REQUIRE=$(TALON_REQUIRE) TALON_SIM_IMAGE=$(SIM_IMAGE) TALON_PAUSE_IMAGE=$(PAUSE_IMAGE) \
		$(GOTESTSUM) --format testname --format-hide-empty-pkg --jsonfile $(TEST_JSON) -- -count=1 -timeout $(TEST_TIMEOUT) \
		$(SLOW_TEST_PACKAGES) $$packages $(LAST_TEST_PACKAGES) || status=$$?; \
		go run ./hack/testfailures $(TEST_JSON) || true; exit $${status:-0}

# What the short tier needs: the envtest plane (etcd, kube-apiserver; kube-controller-manager
# for internal/plane's plane of processes), kustomize for the CRDs, clusterctl and the release
# manifests for test/manifests and the moves, versitygw for the S3 tests.
SHORT_TOOLS := $(KUSTOMIZE) $(ETCD) $(KUBE_APISERVER) $(KUBE_CONTROLLER_MANAGER) $(CLUSTERCTL) $(VERSITYGW) $(GOTESTSUM)

.PHONY: test-short
test-short: $(SHORT_TOOLS) release-manifests build ## The inner loop: unit, envtest and light-node tests (go test -short), no heavy simulated node, Docker, network boot or kubelet plane
	KUBEBUILDER_ASSETS=$(BIN) TALON_PROGRAMS_DIR=$(BIN) TALON_REQUIRE=envtest \
		$(GOTESTSUM) --format testname --format-hide-empty-pkg -- -short -count=1 -timeout 20m ./...

.PHONY: test-e2e
test-e2e: release-manifests tools build sim-image pause-image docker-build sidero-images cert-manager ## Run only the end-to-end suite (talon up --managers pods, clusterctl init/describe/move, talon down)
	KUBEBUILDER_ASSETS=$(BIN) TALON_PROGRAMS_DIR=$(BIN) TALON_REQUIRE=$(TALON_REQUIRE) TALON_SIM_IMAGE=$(SIM_IMAGE) TALON_PAUSE_IMAGE=$(PAUSE_IMAGE) \
		$(GOTESTSUM) --format standard-verbose -- -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/...

.PHONY: bench
bench: release-manifests tools ## Run every benchmark and print its figures, ending with the scenario table, the in-place vs replacement upgrade and the side-by-side table with Sidero's providers (record them in docs/benchmarks.md)
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory sim-image; fi
	KUBEBUILDER_ASSETS=$(BIN) TALON_SIM_IMAGE=$(SIM_IMAGE) go test -run '^$$' -bench . -benchmem -timeout 60m \
		$$(go list ./... | grep -v /test/e2e)
	@# The scenario table: clusters on a management plane of processes, as talon up makes it.
	KUBEBUILDER_ASSETS=$(BIN) TALON_SIM_IMAGE=$(SIM_IMAGE) go test -run '^$$' -bench Scenarios -benchtime 1x -timeout 60m ./test/e2e/
	@# One 3 + 2 upgrade in place and by replacement, side by side (docs/upgrades.md).
	KUBEBUILDER_ASSETS=$(BIN) TALON_SIM_IMAGE=$(SIM_IMAGE) go test -run '^$$' -bench UpgradeInPlaceVsReplacement -benchtime 1x -timeout 60m ./test/e2e/
	@# Side by side with Sidero Labs' providers on the same infrastructure (docs/sidero.md).
	KUBEBUILDER_ASSETS=$(BIN) TALON_SIM_IMAGE=$(SIM_IMAGE) go test -run '^$$' -bench SideBySide -benchtime 1x -timeout 90m ./test/e2e/

.PHONY: bench-scale
bench-scale: release-manifests tools build ## Create single-node clusters in stages on one set of managers, with light simulated nodes, and print time to Ready, reconcile latency, queues, memory, CPU and API request rate per stage (TALON_SCALE_CLUSTERS, default 100,500,1000,2000; docs/benchmarks.md)
	KUBEBUILDER_ASSETS=$(BIN) TALON_PROGRAMS_DIR=$(BIN) go test -run '^$$' -bench Scale -benchtime 1x -timeout 600m ./test/e2e/

##@ Release

# The cluster templates, ClusterClasses and addons clusterctl finds beside the infrastructure
# provider.
TEMPLATES := $(wildcard templates/cluster-template*.yaml templates/clusterclass-*.yaml templates/addon-*.yaml)

.PHONY: release-manifests
release-manifests: $(KUSTOMIZE) ## Write the clusterctl components and metadata.yaml into out/
	@mkdir -p $(OUT)
	$(KUSTOMIZE) build config/bootstrap/default > $(OUT)/bootstrap-components.yaml
	$(KUSTOMIZE) build config/controlplane/default > $(OUT)/control-plane-components.yaml
	$(KUSTOMIZE) build config/infrastructure/default > $(OUT)/infrastructure-components.yaml
	$(KUSTOMIZE) build config/infrastructure/metal-only > $(OUT)/infrastructure-components-metal-only.yaml
	$(KUSTOMIZE) build config/infrastructure/metal-boot-service > $(OUT)/infrastructure-components-metal-boot-service.yaml
	$(KUSTOMIZE) build config/controlplane/extension > $(OUT)/in-place-updates.yaml
	$(KUSTOMIZE) build config/monitoring > $(OUT)/monitoring.yaml
	$(KUSTOMIZE) build config/kubernetescluster > $(OUT)/kubernetescluster.yaml
	$(KUSTOMIZE) build config/network-policy > $(OUT)/network-policies.yaml
	cp metadata.yaml $(TEMPLATES) $(OUT)/
	@echo "Wrote $(OUT)/{bootstrap,control-plane,infrastructure}-components.yaml, infrastructure-components-metal-{only,boot-service}.yaml, in-place-updates.yaml, monitoring.yaml, network-policies.yaml, kubernetescluster.yaml, metadata.yaml, cluster-template{,-metal,-metal-clusterclass}.yaml, clusterclass-talos-{docker,metal}.yaml and addon-local-path-provisioner.yaml"
	@# A clusterctl local repository of these files and the clusterctl.yaml that points at it:
	@#   clusterctl init --config out/clusterctl.yaml --bootstrap talon --control-plane talon --infrastructure talon
	@# Cluster API's core manager calls Talon's in-place update hooks with these two gates on.
	@rm -rf $(OUT)/repository; printf 'EXP_RUNTIME_SDK: "true"\nEXP_IN_PLACE_UPDATES: "true"\nproviders:\n' > $(OUT)/clusterctl.yaml
	@for p in bootstrap:BootstrapProvider control-plane:ControlPlaneProvider infrastructure:InfrastructureProvider; do \
		name=$${p%%:*}; dir=$(OUT)/repository/$$name-talon/$(RELEASE_VERSION); mkdir -p $$dir; \
		cp $(OUT)/$$name-components.yaml $(OUT)/metadata.yaml $$dir/; \
		printf -- '- name: talon\n  type: %s\n  url: file://%s/%s-components.yaml\n' $${p##*:} $$dir $$name >> $(OUT)/clusterctl.yaml; \
	done
	cp $(TEMPLATES) $(OUT)/infrastructure-components-metal-only.yaml $(OUT)/infrastructure-components-metal-boot-service.yaml $(OUT)/repository/infrastructure-talon/$(RELEASE_VERSION)/
	@# Cluster API's own core provider, built from the module Talon is tested with, so that
	@# clusterctl init needs nothing from GitHub, with the probe timeouts and leader election
	@# times of a small management cluster (hack/management-cluster, docs/managers.md).
	@# go list -m names no directory for a module the cache does not hold yet: download it first.
	@go mod download sigs.k8s.io/cluster-api
	@capi=$$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api); capiv=$$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api); \
		dir=$(OUT)/repository/cluster-api/$$capiv; mkdir -p $$dir; \
		bash hack/management-cluster/build.sh $(KUSTOMIZE) $$capi/core/config/default hack/management-cluster/probes.yaml \
			hack/management-cluster/capi-leader-election.yaml | sed -e "s#gcr.io/k8s-staging-cluster-api/cluster-api-controller:main#$(CAPI_IMAGE_NAME):$$capiv#" \
			-e "s#imagePullPolicy: Always#imagePullPolicy: IfNotPresent#" > $$dir/core-components.yaml; \
		cp $$capi/metadata.yaml $$dir/; \
		printf -- '- name: cluster-api\n  type: CoreProvider\n  url: file://%s/core-components.yaml\n' $$dir >> $(OUT)/clusterctl.yaml
	@# out/clusterctl-metal.yaml: the same, with the infrastructure provider for bare metal only,
	@# running the boot service (docs/metal.md).
	@sed 's#/infrastructure-components.yaml#/infrastructure-components-metal-boot-service.yaml#' $(OUT)/clusterctl.yaml > $(OUT)/clusterctl-metal.yaml
	@echo "Wrote the clusterctl repository $(OUT)/repository ($(RELEASE_VERSION)), $(OUT)/clusterctl.yaml and $(OUT)/clusterctl-metal.yaml"
	@# Sidero's providers ("talos") from their module directories, and out/clusterctl-sidero.yaml:
	@# Cluster API, Talon's infrastructure provider and Sidero's bootstrap and control plane.
	@# Their manager images are named as in their releases (the module's version, pulled only
	@# if absent); make sidero-images builds them.
	@cd hack/tools/sidero && go mod download $(SIDERO_BOOTSTRAP_MODULE) $(SIDERO_CONTROLPLANE_MODULE)
	@capiv=$$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api); \
		printf 'providers:\n- name: cluster-api\n  type: CoreProvider\n  url: file://%s/repository/cluster-api/%s/core-components.yaml\n' $(OUT) $$capiv > $(OUT)/clusterctl-sidero.yaml; \
		printf -- '- name: talon\n  type: InfrastructureProvider\n  url: file://%s/repository/infrastructure-talon/$(RELEASE_VERSION)/infrastructure-components.yaml\n' $(OUT) >> $(OUT)/clusterctl-sidero.yaml
	@for p in bootstrap:BootstrapProvider:$(SIDERO_BOOTSTRAP_MODULE) control-plane:ControlPlaneProvider:$(SIDERO_CONTROLPLANE_MODULE); do \
		name=$${p%%:*}; rest=$${p#*:}; type=$${rest%%:*}; mod=$${rest#*:}; \
		moddir=$$(cd hack/tools/sidero && go list -m -f '{{.Dir}}' $$mod); modv=$$(cd hack/tools/sidero && go list -m -f '{{.Version}}' $$mod); \
		dir=$(OUT)/repository/$$name-talos/$$modv; mkdir -p $$dir; \
		bash hack/management-cluster/build.sh $(KUSTOMIZE) $$moddir/config/default hack/management-cluster/probes.yaml 2> >(grep -v "^# Warning" >&2) | \
			sed -e "s#\(image: ghcr.io/siderolabs/[^:]*\):latest#\1:$$modv#" -e "s#imagePullPolicy: Always#imagePullPolicy: IfNotPresent#" > $$dir/$$name-components.yaml; \
		cp $$moddir/config/metadata/metadata.yaml $$dir/; \
		printf -- '- name: talos\n  type: %s\n  url: file://%s/%s-components.yaml\n' $$type $$dir $$name >> $(OUT)/clusterctl-sidero.yaml; \
	done
	@echo "Wrote Sidero's providers into $(OUT)/repository and $(OUT)/clusterctl-sidero.yaml"

.PHONY: docker-build
docker-build: $(CAPI_MANAGER) ## Build the manager images FROM scratch (no image is pulled), and Cluster API's core manager's under the name its release uses
	@capiv=$$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api); mkdir -p $(OUT)/images/cluster-api/bin; \
		cp $(CAPI_MANAGER) $(OUT)/images/cluster-api/manager; \
		docker build --quiet -f hack/Dockerfile.manager -t $(CAPI_IMAGE_NAME):$$capiv $(OUT)/images/cluster-api
	@for p in bootstrap controlplane; do \
		mkdir -p $(OUT)/images/$$p/bin; \
		CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(OUT)/images/$$p/manager ./cmd/$$p-manager; \
		docker build --quiet -f hack/Dockerfile.manager -t $(IMAGE_REGISTRY)/talon-$$p-manager:$(IMAGE_TAG) $(OUT)/images/$$p; \
	done
	@# The infrastructure image also runs the Docker clusters' load balancers ('talon lb'),
	@# and its manager names it as their image.
	@mkdir -p $(OUT)/images/infrastructure/bin
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS) -X github.com/talon-capi/talon/infrastructure/setup.imageOfThisBuild=$(IMAGE_REGISTRY)/talon-infrastructure-manager:$(IMAGE_TAG)" \
		-o $(OUT)/images/infrastructure/manager ./cmd/infrastructure-manager
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(OUT)/images/infrastructure/bin/talon ./cmd/talon
	docker build --quiet -f hack/Dockerfile.manager -t $(IMAGE_REGISTRY)/talon-infrastructure-manager:$(IMAGE_TAG) $(OUT)/images/infrastructure

# The images of Sidero's managers, as their releases name them (release-manifests writes the
# same names into their components).
SIDERO_BOOTSTRAP_IMAGE := ghcr.io/siderolabs/cluster-api-talos-controller
SIDERO_CONTROLPLANE_IMAGE := ghcr.io/siderolabs/cluster-api-control-plane-talos-controller

.PHONY: sidero-images
sidero-images: $(SIDERO_BOOTSTRAP_MANAGER) $(SIDERO_CONTROLPLANE_MANAGER) ## Build the images of Sidero Labs' managers FROM scratch, under their releases' names (the migration test runs them as Pods)
	@for p in $(SIDERO_BOOTSTRAP_MANAGER):$(SIDERO_BOOTSTRAP_IMAGE):$(SIDERO_BOOTSTRAP_MODULE) $(SIDERO_CONTROLPLANE_MANAGER):$(SIDERO_CONTROLPLANE_IMAGE):$(SIDERO_CONTROLPLANE_MODULE); do \
		bin=$${p%%:*}; rest=$${p#*:}; image=$${rest%%:*}; mod=$${rest#*:}; \
		modv=$$(cd hack/tools/sidero && go list -m -f '{{.Version}}' $$mod); dir=$(OUT)/images/$$(basename $$bin); \
		mkdir -p $$dir/bin; cp $$bin $$dir/manager; \
		docker build --quiet -f hack/Dockerfile.manager -t $$image:$$modv $$dir; \
	done

# Whether the simulator image carries the next minor's binaries (v1.37); the tests need them,
# make quickstart at the pinned version does not.
SIM_NEXT_MINOR ?= yes

.PHONY: sim-image
sim-image: $(KUBE_APISERVER) $(KUBE_CONTROLLER_MANAGER) $(if $(SIM_NEXT_MINOR),$(KUBE_NEXT_APISERVER) $(KUBE_NEXT_CONTROLLER_MANAGER)) ## Build the node simulator image: talon sim, kube-apiserver, kube-controller-manager (v1.36, and v1.37 unless SIM_NEXT_MINOR is empty) FROM scratch
	@rm -rf $(OUT)/sim-image/v1.37; mkdir -p $(OUT)/sim-image/tmp $(OUT)/sim-image/v1.37
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(OUT)/sim-image/talon ./cmd/talon
	cp $(KUBE_APISERVER) $(KUBE_CONTROLLER_MANAGER) $(OUT)/sim-image/
	$(if $(SIM_NEXT_MINOR),cp $(KUBE_NEXT_APISERVER) $(KUBE_NEXT_CONTROLLER_MANAGER) $(OUT)/sim-image/v1.37/)
	docker build --quiet -f hack/Dockerfile.sim -t $(SIM_IMAGE) $(OUT)/sim-image

.PHONY: pause-image
pause-image: ## Build the Pod sandbox image of the kubelet-run management plane FROM scratch
	@mkdir -p $(OUT)/pause-image
	CGO_ENABLED=0 go build -trimpath -o $(OUT)/pause-image/pause ./hack/pause
	docker build --quiet -f hack/pause/Dockerfile -t $(PAUSE_IMAGE) $(OUT)/pause-image

.PHONY: cert-manager
cert-manager: $(HELM) ## Build cert-manager from its module into out/cert-manager (binaries, install manifest) and its images FROM scratch
	HELM=$(HELM) bash hack/tools/cert-manager/build.sh $(OUT)/cert-manager

.PHONY: clean
clean: ## Remove out/ (bin/ keeps the cached tools; delete it by hand to rebuild them)
	rm -rf $(OUT)

##@ Tools (built from hack/tools, cached in bin/)

# Each rule builds through hack/tools/cache.sh, which keeps every tool in a cache keyed by its
# module's go.mod and go.sum, the Go version, the build flags and the command: a fresh clone, or
# a checkout whose go.mod files merely have new dates, links the kept binaries into bin/ in
# seconds instead of linking them again. The rules are safe under make -j.
TOOL_CACHE := $(ROOT)/hack/tools/cache.sh
# $(call gotool,<module dir under hack/tools>,<go build flags>,<package>): a tool of that module.
gotool = cd hack/tools/$(1) && $(TOOL_CACHE) $@ go.mod go.sum -- go build $(2) -o {} $(3)
# Under make -j, two tools of one module built at once would each compile the dependencies
# they share; these order-only prerequisites build them one after another, so that -j overlaps
# only tools whose dependency trees differ.
$(KUBE_CONTROLLER_MANAGER): | $(KUBE_APISERVER)
$(KUBE_SCHEDULER): | $(KUBE_CONTROLLER_MANAGER)
$(KUBELET): | $(KUBE_SCHEDULER)
$(KUBE_PROXY): | $(KUBELET)
$(KUBE_NEXT_CONTROLLER_MANAGER): | $(KUBE_NEXT_APISERVER)
$(KUBE_PREV_CONTROLLER_MANAGER): | $(KUBE_PREV_APISERVER)
$(CAPI_MANAGER): | $(CLUSTERCTL)
$(SIDERO_CONTROLPLANE_MANAGER): | $(SIDERO_BOOTSTRAP_MANAGER)

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	$(call gotool,.,,sigs.k8s.io/controller-tools/cmd/controller-gen)
$(KUSTOMIZE): hack/tools/go.mod hack/tools/go.sum
	$(call gotool,.,,sigs.k8s.io/kustomize/kustomize/v5)
$(GOTESTSUM): hack/tools/go.mod hack/tools/go.sum
	$(call gotool,.,,gotest.tools/gotestsum)
$(VERSITYGW): hack/tools/versitygw/go.mod hack/tools/versitygw/go.sum
	$(call gotool,versitygw,,github.com/versity/versitygw/cmd/versitygw)
$(GOLANGCI_LINT): hack/tools/lint/go.mod hack/tools/lint/go.sum
	$(call gotool,lint,,github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
# Kubernetes binaries report the version they were built from (clusterctl refuses an API
# server that reports none), as the release build stamps it.
kube_ldflags = $(shell cd $(1) && v=$$(go list -m -f '{{.Version}}' k8s.io/kubernetes) && \
	m=$${v#v}; echo "-X k8s.io/component-base/version.gitVersion=$$v -X k8s.io/component-base/version.gitMajor=$${m%%.*} \
	-X k8s.io/component-base/version.gitMinor=$$(echo $$m | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean")
# $(call kubetool,<module dir under hack/tools>,<command>): a Kubernetes binary of that minor.
kubetool = $(call gotool,$(1),-ldflags "$(call kube_ldflags,hack/tools/$(1))",k8s.io/kubernetes/cmd/$(2))
$(KUBE_APISERVER): hack/tools/kubernetes/go.mod hack/tools/kubernetes/go.sum
	$(call kubetool,kubernetes,kube-apiserver)
$(KUBE_CONTROLLER_MANAGER): hack/tools/kubernetes/go.mod hack/tools/kubernetes/go.sum
	$(call kubetool,kubernetes,kube-controller-manager)
$(KUBE_NEXT_APISERVER): hack/tools/kubernetes-1.37/go.mod hack/tools/kubernetes-1.37/go.sum
	$(call kubetool,kubernetes-1.37,kube-apiserver)
$(KUBE_NEXT_CONTROLLER_MANAGER): hack/tools/kubernetes-1.37/go.mod hack/tools/kubernetes-1.37/go.sum
	$(call kubetool,kubernetes-1.37,kube-controller-manager)
$(KUBE_PREV_APISERVER): hack/tools/kubernetes-1.35/go.mod hack/tools/kubernetes-1.35/go.sum
	$(call kubetool,kubernetes-1.35,kube-apiserver)
$(KUBE_PREV_CONTROLLER_MANAGER): hack/tools/kubernetes-1.35/go.mod hack/tools/kubernetes-1.35/go.sum
	$(call kubetool,kubernetes-1.35,kube-controller-manager)
$(KUBE_SCHEDULER): hack/tools/kubernetes/go.mod hack/tools/kubernetes/go.sum
	$(call kubetool,kubernetes,kube-scheduler)
$(KUBELET): hack/tools/kubernetes/go.mod hack/tools/kubernetes/go.sum
	$(call kubetool,kubernetes,kubelet)
$(KUBE_PROXY): hack/tools/kubernetes/go.mod hack/tools/kubernetes/go.sum
	$(call kubetool,kubernetes,kube-proxy)
# cri-dockerd is built as its own main module with one change (hack/tools/cri-dockerd/build.sh).
$(CRI_DOCKERD): hack/tools/cri-dockerd/build.sh hack/tools/cri-dockerd/oom_score_adj.go.in
	cd hack/tools/cri-dockerd && $(TOOL_CACHE) $@ build.sh oom_score_adj.go.in -- bash build.sh {}
# Helm as its release reports itself (version, and the Kubernetes version charts are checked against).
$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	$(call gotool,helm,-ldflags "-X helm.sh/helm/v3/internal/version.version=$$(go list -m -f '{{.Version}}' helm.sh/helm/v3) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=36",helm.sh/helm/v3/cmd/helm)
$(ETCD): hack/tools/etcd/go.mod hack/tools/etcd/go.sum
	$(call gotool,etcd,,go.etcd.io/etcd/server/v3)
$(CLUSTERCTL): hack/tools/capi/go.mod hack/tools/capi/go.sum
	$(call gotool,capi,,sigs.k8s.io/cluster-api/cmd/clusterctl)
$(CAPI_MANAGER): hack/tools/capi/go.mod hack/tools/capi/go.sum
	$(call gotool,capi,,sigs.k8s.io/cluster-api/core)
$(SIDERO_BOOTSTRAP_MANAGER): hack/tools/sidero/go.mod hack/tools/sidero/go.sum
	$(call gotool,sidero,,$(SIDERO_BOOTSTRAP_MODULE))
$(SIDERO_CONTROLPLANE_MANAGER): hack/tools/sidero/go.mod hack/tools/sidero/go.sum
	$(call gotool,sidero,,$(SIDERO_CONTROLPLANE_MODULE))
# talosctl as Talos' release builds it; hack/tools/talosctl/go.mod carries Talos' own replace
# directives (a module's replaces apply only in its main module, so "go install" refuses it).
$(TALOSCTL): hack/tools/talosctl/go.mod hack/tools/talosctl/go.sum
	$(call gotool,talosctl,-tags grpcnotrace -ldflags "-s -w",github.com/siderolabs/talos/cmd/talosctl)
