# cni: one static binary holding a whole CNI toolkit.
GO        ?= go
PREFIX    ?= /opt/cni
BINDIR    ?= $(PREFIX)/bin
DESTDIR   ?=
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
PKG       := github.com/cnikit/cni
LDFLAGS   := -s -w -buildid= -X $(PKG)/internal/dispatch.buildVersion=$(VERSION) -X $(PKG)/internal/dispatch.buildCommit=$(COMMIT)
BIN       := bin/cni

.PHONY: build test vet fmt-check bench install demo clean test-kernel

build: $(BIN)

# Always rebuilt: cheap with Go's build cache, and never stale.
.PHONY: $(BIN)
$(BIN):
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cni

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The whole suite: vet, gofmt, then every package under the race detector, as root
# (tests make their own network namespaces and never touch the machine's own).
test: vet fmt-check
	$(GO) test -race -count=1 -timeout 30m ./...

# REF=DIR measures the reference plugins in DIR beside ours (cnibench -ref).
bench: build
	$(GO) run ./cmd/cnibench -bin $(BIN) $(if $(REF),-ref $(REF))

test-kernel:
	scripts/test-kernel.sh

install: build
	DESTDIR='$(DESTDIR)' scripts/install-symlinks.sh --binary $(BIN) --dir $(BINDIR)

demo: build
	scripts/demo.sh $(BIN)

clean:
	rm -rf bin
