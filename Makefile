# infermatrix: `make demo` runs the quickstart on the built-in server;
# `make test` is what CI runs. `make help` lists every target.

GO      ?= go
# FUZZTIME is how long make fuzz runs each fuzzer, e.g. make fuzz FUZZTIME=10m
# (-timeout 0: go test's own 10-minute limit would stop a fuzzer at 10m).
FUZZTIME ?= 60s
BIN     := bin/infermatrix
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
# DATE is the commit's date in UTC, not the build's: two builds of one
# commit are then byte-identical, and so are their checksums.
DATE    ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
PKG     := github.com/infermatrix/infermatrix
LDFLAGS := -s -w -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT) -X $(PKG)/internal/buildinfo.Date=$(DATE)

.PHONY: help build demo test lint fmt bench fuzz schema tidy-check clean release image-context image

## help: list the targets
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST) | column -t -s ':'

## build: build a static bin/infermatrix
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/infermatrix

## demo: run the quickstart on the built-in server and print where its decision record is
demo: build
	./$(BIN) run experiments/quickstart.yaml

# staticcheck, pinned: go run fetches this exact version from the module
# proxy once and caches it; nothing is installed by hand.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

## lint: gofmt check, go.mod tidy, go vet and staticcheck
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## test: lint (gofmt, go.mod tidy, go vet, staticcheck), and every test with the race detector, then every skipped test and why
# Packages run one at a time (-p 1): several tests run real load against the
# built-in server in real time, and a package's tests competing with
# another's for two cores would measure the contention, not the code.
# internal/testsum reads go test -json as it comes and prints go test's usual
# lines, failing tests' output in full, and at the end every skipped test with
# its reason: a test skipped for want of ../shared/tokenizers or Chromium must
# be seen. pipefail: a go test that fails fails make, whatever testsum says.
# Tests that only compute (COMPUTE_TESTS: bootstraps, a calibration fit)
# skip under the race detector, which slows them sixfold with no goroutines
# to check, and run in a second pass without it.
COMPUTE_TESTS := ^(TestFalseAlarmRate|TestSmallChangeIsNotFlagged|TestCalibrateVirtualTwin)$$
test: SHELL := bash
test: lint
	$(GO) build -o bin/testsum ./internal/testsum
	set -o pipefail; { $(GO) test -race -p 1 -json ./... ; race=$$?; \
		$(GO) test -p 1 -json -run '$(COMPUTE_TESTS)' ./compare ./cmd/infermatrix ; exit $$(( race | $$? )) ; } | bin/testsum \
		-note 'INFERMATRIX_REQUIRE_SHARED=1 and INFERMATRIX_REQUIRE_CHROMIUM=1 (as .ci/run sets) turn a missing ../shared or Chromium into a failure instead of a skip. The skips that say "computation only" ran in the second pass, without -race.'

## fmt: format the code
fmt:
	gofmt -w .

## bench: run the benchmarks (figures go in docs/performance.md)
bench:
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -timeout 30m ./...

## fuzz: fuzz the SSE reader, the chunk decoder and the experiment loader, FUZZTIME each
# A Parse of a whole experiment takes milliseconds, so minimizing each new
# input the loader's fuzzer finds would take go test's default minute: five
# seconds leaves the time for fuzzing.
fuzz:
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzSSEReader$$' -fuzztime $(FUZZTIME) -timeout 0
	$(GO) test ./protocol -run '^$$' -fuzz '^FuzzDecodeChunk$$' -fuzztime $(FUZZTIME) -timeout 0
	$(GO) test ./schema -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -timeout 0 -fuzzminimizetime 5s

## schema: regenerate schema/infermatrix.schema.json from the Go types
schema:
	$(GO) test ./schema/jsonschema -run TestJSONSchemaGolden -update

## tidy-check: fail if go.mod or go.sum are not tidy
tidy-check:
	$(GO) mod tidy -diff

# make release: every platform a release ships, GOOS/GOARCH. All are
# built with CGO_ENABLED=0, so each binary is static (no libc to match on
# the host, and the image needs nothing but the binary).
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
DIST      := dist
# The image's binary: linux on the build host's architecture unless told,
# e.g. make image IMAGE_ARCH=arm64.
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE      ?= infermatrix:$(VERSION)
# The build host's CA bundle (Debian/Ubuntu/Alpine path), copied into the
# image so that HTTPS targets verify without a base image.
CA_CERTS   ?= /etc/ssl/certs/ca-certificates.crt

## release: static binaries and .tar.gz for linux and darwin on amd64 and arm64 in dist/, with dist/SHA256SUMS (VERSION=v1.2.3 overrides git describe)
# The tarballs are reproducible (GNU tar: sorted names, owner 0, the
# commit's date as mtime; gzip -n), so a rebuild of a tag gives the same
# SHA256SUMS.
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=infermatrix_$(VERSION)_$${os}_$${arch}; \
		echo "build $$name"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/$$name ./cmd/infermatrix; \
		mkdir -p $(DIST)/.tar/$$name; \
		cp $(DIST)/$$name $(DIST)/.tar/$$name/infermatrix; cp LICENSE NOTICE README.md $(DIST)/.tar/$$name/; \
		tar -C $(DIST)/.tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='$(or $(DATE),1970-01-01T00:00:00Z)' -cf - $$name | gzip -n -9 > $(DIST)/$$name.tar.gz; \
	done
	rm -rf $(DIST)/.tar
	cd $(DIST) && sha256sum infermatrix_* > SHA256SUMS
	@echo "dist/: $$(ls $(DIST) | wc -l) files; verify with: cd $(DIST) && sha256sum -c SHA256SUMS"

## image-context: the Dockerfile's build context in dist/image (the static linux binary, CA certificates, /etc/passwd for uid 65532, /work, /tmp)
# No RUN step can create files in a FROM scratch image (there is no
# shell), so everything the image holds is prepared here and COPY'd.
image-context:
	rm -rf $(DIST)/image && mkdir -p $(DIST)/image/rootfs/etc/ssl/certs $(DIST)/image/rootfs/tmp $(DIST)/image/home/work
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/image/infermatrix ./cmd/infermatrix
	cp $(CA_CERTS) $(DIST)/image/rootfs/etc/ssl/certs/ca-certificates.crt
	printf 'root:x:0:0:root:/root:/sbin/nologin\ninfermatrix:x:65532:65532:infermatrix:/work:/sbin/nologin\n' > $(DIST)/image/rootfs/etc/passwd
	printf 'root:x:0:\ninfermatrix:x:65532:\n' > $(DIST)/image/rootfs/etc/group
	chmod 0755 $(DIST)/image/home/work && chmod 1777 $(DIST)/image/rootfs/tmp
	cp Dockerfile $(DIST)/image/Dockerfile

## image: build the container image $(IMAGE) from dist/image with docker (CONTAINER_TOOL=podman or buildah also work)
CONTAINER_TOOL ?= docker
image: image-context
	$(CONTAINER_TOOL) build -t $(IMAGE) -f $(DIST)/image/Dockerfile $(DIST)/image

## clean: remove build output and runs
clean:
	rm -rf bin runs dist
