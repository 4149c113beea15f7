# cni: one static binary holding a whole CNI toolkit.
GO        ?= go
empty     :=
space     := $(empty) $(empty)
comma     := ,
PREFIX    ?= /opt/cni
BINDIR    ?= $(PREFIX)/bin
DESTDIR   ?=
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
PKG       := github.com/cnikit/cni
LDFLAGS   := -s -w -buildid= -X $(PKG)/internal/core/build.Version=$(VERSION) -X $(PKG)/internal/core/build.Commit=$(COMMIT)
BIN       := bin/cni
# Every timestamp in the image and the packages: the last commit's, so that the same
# commit always gives the same digests.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
SOURCE_URL ?= https://github.com/cnikit/cni
IMAGE     ?= docker.io/cnikit/cni
# The release being made: the newest entry of the packages' changelog. The manifests of
# deploy/kubernetes name IMAGE:IMAGE_TAG, the tag make image gives the archive whatever
# the commit (the image's version label still names the build).
RELEASE   := v$(shell sed -n 's/^- semver: *//p' packaging/changelog.yml | head -n 1)
IMAGE_TAG ?= $(RELEASE)
ARCHES    := amd64 arm64
# The image and the packages carry one static binary per architecture.
ARCH_BINS := $(foreach a,$(ARCHES),bin/linux-$(a)/cni)
# The same as the tools' -bin flag, relative to tools/: amd64=../bin/linux-amd64/cni,...
ARCH_BIN_FLAG := $(subst $(space),$(comma),$(foreach a,$(ARCHES),$(a)=../bin/linux-$(a)/cni))
# The GC caller of CRI nodes (tools/cmd/cni-gc-cri), shipped beside cni: built from the
# tools' module, so that gRPC never reaches the cni binary.
GC_BINS := $(foreach a,$(ARCHES),bin/linux-$(a)/cni-gc-cri)
GC_BIN_FLAG := $(subst $(space),$(comma),$(foreach a,$(ARCHES),$(a)=../bin/linux-$(a)/cni-gc-cri))
# The build tools (go-containerregistry, nfpm) live in their own module, never linked into cni.
TOOLS     := cd tools && $(GO)
# Their tests, given the binaries make builds for the image and the packages
# (tools/internal/cnibuild): the variable goes after the cd, on go's command.
TOOLS_TEST := cd tools && CNI_TEST_ARCH_BINS=$(CURDIR)/bin $(GO)

FUZZTIME  ?= 3s

.PHONY: build test test-tools test-e2e test-crio test-cluster test-nofirewall fuzz vet fmt-check lint bench install demo clean test-kernel image packages deps-demo deps-test deps-e2e deps-crio deps-cluster

build: $(BIN)

# Always rebuilt: cheap with Go's build cache, and never stale.
.PHONY: $(BIN)
$(BIN):
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cni

.PHONY: $(ARCH_BINS)
$(ARCH_BINS): bin/linux-%/cni:
	CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/cni

.PHONY: $(GC_BINS)
$(GC_BINS): bin/linux-%/cni-gc-cri:
	cd tools && CGO_ENABLED=0 GOOS=linux GOARCH=$* $(GO) build -trimpath -ldflags '-s -w -buildid=' -o ../$@ ./cmd/cni-gc-cri

# bin/cni-image.tar: the node image for every architecture in one OCI archive, built
# without a container daemon (podman load, docker load, skopeo, ctr import take it).
image: $(ARCH_BINS) $(GC_BINS)
	$(TOOLS) run ./cmd/cni-image -o ../bin/cni-image.tar -version '$(VERSION)' -revision '$(COMMIT)' \
		-source '$(SOURCE_URL)' -name '$(IMAGE)' -tag '$(IMAGE_TAG)' -epoch '$(SOURCE_DATE_EPOCH)' \
		-bin '$(ARCH_BIN_FLAG)' -gc-bin '$(GC_BIN_FLAG)'

# bin/cni_*.deb and bin/cni-*.rpm for every architecture: /opt/cni/bin/cni, one symlink
# per plugin of the registry (bin/cni --list), /usr/libexec/cni/cni-gc-cri, the systemd
# units of deploy/systemd.
packages: $(BIN) $(ARCH_BINS) $(GC_BINS)
	$(TOOLS) run ./cmd/cni-packages -o ../bin -version '$(VERSION)' -homepage '$(SOURCE_URL)' \
		-list ../$(BIN) -units ../deploy/systemd -license ../LICENSE -changelog ../packaging/changelog.yml \
		-epoch '$(SOURCE_DATE_EPOCH)' -bin '$(ARCH_BIN_FLAG)' -gc-bin '$(GC_BIN_FLAG)'

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The linters, at pinned versions, installed by go install into bin/lint/<tool>-<version>/
# (a fresh CI machine fetches them from the module proxy once). staticcheck covers both
# modules. deadcode runs twice: with -test, nothing may be unreachable at all; without,
# nothing but the tests' helpers (internal/testbed, the ...test packages) and the public
# packages (pkg/: their callers are programs outside the module, and their tests and
# Examples reach all of them) may be reachable from tests alone: a function only tests
# use goes into a _test.go file or a test helper package. An Example without an Output
# comment is compiled, never run, so no test reaches it: pkg/inproc's show a node's
# paths, which a test must not touch.
STATICCHECK_VERSION := v0.8.2
DEADCODE_VERSION    := v0.52.0
STATICCHECK := $(CURDIR)/bin/lint/staticcheck-$(STATICCHECK_VERSION)/staticcheck
DEADCODE    := $(CURDIR)/bin/lint/deadcode-$(DEADCODE_VERSION)/deadcode
lint: $(STATICCHECK) $(DEADCODE)
	$(STATICCHECK) ./...
	cd tools && $(STATICCHECK) -tags e2e,crio,cluster ./...
	cd tools/crio && $(STATICCHECK) -tags '$(CRIO_TAGS)' ./cmd/...
	$(DEADCODE) -test ./... >bin/lint/deadcode-test.txt
	$(DEADCODE) ./... >bin/lint/deadcode.txt
	@out=$$(grep -v ': unreachable func: Example' bin/lint/deadcode-test.txt; grep -Ev '^internal/testbed/|^pkg/|test/[^/]+\.go:' bin/lint/deadcode.txt); \
	if [ -n "$$out" ]; then echo "deadcode: unreachable functions (one that only tests use belongs in a _test.go file or a test helper package):"; echo "$$out"; exit 1; fi

$(STATICCHECK):
	GOBIN=$(@D) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(DEADCODE):
	GOBIN=$(@D) $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)

# What the demo and the tests need, first: scripts/deps.sh installs what is missing as
# root on Debian, and elsewhere names all of it and stops.
deps-demo deps-test deps-e2e deps-crio deps-cluster:
	scripts/deps.sh $(@:deps-%=%)

# The whole suite: vet, gofmt, the linters, then every package under the race detector, as root
# (tests make their own network namespaces and never touch the machine's own), then
# every fuzz target for a bounded time.
test: deps-test vet fmt-check lint
	$(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) --no-print-directory test-nofirewall
	$(MAKE) test-tools
	$(MAKE) --no-print-directory fuzz

# The packages of scripts/nofirewall-packages again, as on a node with no iptables and
# no nft: cmd/nofirewall hides those binaries in a mount namespace of its own and fails
# the run if anything execs one. Tests that need them by nature skip, saying why.
NOFIREWALL_PKGS := $(shell grep -v '^\#' scripts/nofirewall-packages)
test-nofirewall:
	$(GO) build -o bin/nofirewall ./cmd/nofirewall
	bin/nofirewall -- $(GO) test -count=1 -timeout 15m $(NOFIREWALL_PKGS)

# The build tools' module: the image, the packages and the Kubernetes manifests, tested
# with the binaries make image and make packages ship (go test in tools/ alone builds
# its own).
test-tools: $(ARCH_BINS) $(GC_BINS)
	$(TOOLS) vet ./...
	$(TOOLS_TEST) test -count=1 -timeout 15m ./...

# The containerd end-to-end suite (tools/e2e, build tag e2e): Debian's containerd and runc
# run pods through their CRI, as kubelet does, on our plugins, inside namespaces the tests
# own. Needs root, containerd, runc, iproute2, iptables, nftables.
HOSTARCH  := $(shell $(GO) env GOARCH 2>/dev/null || echo amd64)
test-e2e: deps-e2e bin/linux-$(HOSTARCH)/cni bin/linux-$(HOSTARCH)/cni-gc-cri
	$(TOOLS) vet -tags e2e ./e2e/ ./crinode/
	$(TOOLS_TEST) test -tags e2e -count=1 -timeout 15m ./e2e/

# The lab's outside programs, built at pinned versions from the Go module proxy; none
# is linked into cni. flanneld: the version tools/flanneld/go.mod pins (its own module,
# with a stand-in for a cloud SDK the proxy does not serve; cgo for its UDP backend).
# The reference plugins: REF_VERSION, the release internal/testbed/reftest holds us to.
# The reference flannel plugin: flannel-io/cni-plugin is not served, so the one it was
# forked from, containernetworking/plugins' meta/flannel of REF_FLANNEL_VERSION.
REF_VERSION         := v1.9.1
REF_FLANNEL_VERSION := v0.9.1
REF_DIR             := bin/reference/plugins-$(REF_VERSION)
REF_FLANNEL         := bin/reference/flannel-$(REF_FLANNEL_VERSION)/flannel
# In bin/flanneld's recipe, which runs it from tools/flanneld.
FLANNEL_VERSION      = $$($(GO) list -m -f '{{.Version}}' github.com/flannel-io/flannel)

# The CRI-O end-to-end suite (tools/crioe2e, build tag crio): CRI-O, built by make at the
# version tools/crio/go.mod pins, with Debian's conmon and runc, runs pods through the
# same CRI client on our plugins and on the reference's, inside namespaces the tests
# own; what CRI-O does that containerd never does (CHECK after ADD, its own host
# ports, GC at start, ...) is tested there. See docs/crio.md.
test-crio: deps-crio bin/linux-$(HOSTARCH)/cni bin/crio bin/pinns bin/crio-load bin/crio-runc $(REF_DIR)/bridge
	$(TOOLS) vet -tags crio ./crioe2e/ ./crinode/
	cd tools && CNI_TEST_ARCH_BINS=$(CURDIR)/bin CNI_CRIO=$(CURDIR)/bin/crio CNI_CRIO_PINNS=$(CURDIR)/bin/pinns \
		CNI_CRIO_LOAD=$(CURDIR)/bin/crio-load CNI_CRIO_RUNC=$(CURDIR)/bin/crio-runc CNI_CRIO_REFERENCE=$(CURDIR)/$(REF_DIR) \
		$(GO) test -tags crio -count=1 -v -timeout 20m ./crioe2e/

# CRI-O from tools/crio (its own module, no replace directives): the build tags leave out
# the btrfs driver and gpgme (no C library beyond libc). pinns is its C helper, from the
# same module's source. crio-load writes the pause image into CRI-O's store; crio-runc
# is runc with containerd's restrict_oom_score_adj (see its doc).
CRIO_TAGS    := containers_image_openpgp exclude_graphdriver_btrfs
CRIO_SRC      = $$($(GO) list -m -f '{{.Dir}}' github.com/cri-o/cri-o)
bin/crio: tools/crio/go.mod tools/crio/go.sum
	cd tools/crio && CGO_ENABLED=0 $(GO) build -trimpath -tags '$(CRIO_TAGS)' -ldflags '-s -w' \
		-o ../../bin/crio github.com/cri-o/cri-o/cmd/crio

bin/pinns: tools/crio/go.mod tools/crio/go.sum
	cd tools/crio && $(GO) mod download github.com/cri-o/cri-o && \
		gcc -std=c99 -O2 -Wall -static -o ../../bin/pinns $(CRIO_SRC)/pinns/src/*.c

# Always rebuilt, as bin/cni: cheap with Go's build cache, and never stale.
.PHONY: bin/crio-load bin/crio-runc
bin/crio-load bin/crio-runc:
	cd tools/crio && CGO_ENABLED=0 $(GO) build -trimpath -tags '$(CRIO_TAGS)' -o ../../$@ ./cmd/$(@F)

# The cluster lab (tools/cluster, build tag cluster): three nodes on one machine, each
# containerd and a real flanneld (vxlan) over a real etcd in namespaces of their own,
# laid out as kubeadm leaves a node; the reference plugins as flannel's manifest
# installs them, then ours as the flannel profile's DaemonSet does, and pods through
# the CRI across nodes. See docs/cluster.md.
test-cluster: deps-cluster bin/linux-$(HOSTARCH)/cni bin/flanneld $(REF_DIR)/bridge $(REF_FLANNEL)
	$(TOOLS) vet -tags cluster ./cluster/
	cd tools && CNI_TEST_ARCH_BINS=$(CURDIR)/bin CNI_LAB_FLANNELD=$(CURDIR)/bin/flanneld \
		CNI_LAB_REFERENCE=$(CURDIR)/$(REF_DIR) CNI_LAB_REFERENCE_FLANNEL=$(CURDIR)/$(REF_FLANNEL) \
		$(GO) test -tags cluster -count=1 -v -timeout 30m ./cluster/

# make reference: both reference builds (for make bench, REF=DIR needs them in one DIR).
.PHONY: reference
reference: $(REF_DIR)/bridge $(REF_FLANNEL)

bin/flanneld: tools/flanneld/go.mod tools/flanneld/go.sum
	cd tools/flanneld && CGO_ENABLED=1 $(GO) build -trimpath \
		-ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$(FLANNEL_VERSION)" \
		-o ../../bin/flanneld github.com/flannel-io/flannel

# Built into a temp dir and renamed: an interrupted build leaves nothing that looks whole.
$(REF_DIR)/bridge:
	rm -rf $(REF_DIR).tmp && mkdir -p $(REF_DIR).tmp
	GOBIN=$(CURDIR)/$(REF_DIR).tmp CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) install -trimpath -ldflags '-s -w' \
		github.com/containernetworking/plugins/plugins/...@$(REF_VERSION)
	rm -f $(REF_DIR).tmp/sample  # an example, not in a release (nor in kubernetes-cni)
	rm -rf $(REF_DIR) && mv $(REF_DIR).tmp $(REF_DIR)

$(REF_FLANNEL):
	mkdir -p $(@D)
	GOBIN=$(CURDIR)/$(@D) CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) install -trimpath -ldflags '-s -w' \
		github.com/containernetworking/plugins/plugins/meta/flannel@$(REF_FLANNEL_VERSION)

# Every `func FuzzXxx` of the module, found by scripts/fuzz.sh, for FUZZTIME each (one
# go test -fuzz per target). A crasher lands in <pkg>/testdata/fuzz/FuzzXxx/.
fuzz:
	GO='$(GO)' FUZZTIME='$(FUZZTIME)' scripts/fuzz.sh

# REF=DIR measures the reference plugins in DIR beside ours (cnibench -ref); BASE=BIN
# another build of cni (before a change) in every section, taking turns (cnibench -base);
# ONLY=a,b picks sections, QUICK=1 runs fewer iterations. See docs/performance.md.
# Its containerd section runs bin/cri-bench (tools/cmd/cri-bench: a CRI client, whose
# gRPC stays out of the main module) with bin/pause, the sandbox image's program; its
# crio section the same with CRI-O (bin/crio and its helpers, as make test-crio); its
# cluster section bin/cluster-bench (tools/cmd/cluster-bench: the lab of make
# test-cluster) with bin/flanneld.
# Only the sections ONLY picks (all without it) get their tools built: CRI-O's build is
# the largest of the tree and needs gcc for pinns.
bench_section = $(if $(ONLY),$(filter $(1),$(subst $(comma), ,$(ONLY))),$(1))
BENCH_TOOLS = $(if $(call bench_section,containerd),bin/cri-bench bin/pause) \
	$(if $(call bench_section,crio),bin/cri-bench bin/pause bin/crio bin/pinns bin/crio-load bin/crio-runc) \
	$(if $(call bench_section,cluster),bin/cluster-bench bin/pause bin/flanneld)
bench: build $(sort $(BENCH_TOOLS))
	$(GO) run ./cmd/cnibench -bin $(BIN) $(if $(REF),-ref $(REF)) $(if $(BASE),-base $(BASE)) $(if $(ONLY),-only $(ONLY)) $(if $(QUICK),-quick)

.PHONY: bin/cri-bench bin/cluster-bench bin/pause
bin/cri-bench bin/cluster-bench:
	cd tools && $(GO) build -o ../$@ ./cmd/$(@F)

bin/pause:
	cd tools && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -buildid=' -o ../bin/pause ./cmd/pause

test-kernel:
	scripts/test-kernel.sh

install: build
	DESTDIR='$(DESTDIR)' scripts/install-symlinks.sh --binary $(BIN) --dir $(BINDIR)

demo: deps-demo build
	scripts/demo.sh $(BIN)

clean:
	rm -rf bin
