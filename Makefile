# infermatrix: `make demo` runs the quickstart on the built-in server;
# `make test` is what CI runs. `make help` lists every target.

GO      ?= go
# FUZZTIME is how long make fuzz runs each fuzzer, e.g. make fuzz FUZZTIME=10m
# (-timeout 0: go test's own 10-minute limit would stop a fuzzer at 10m).
FUZZTIME ?= 60s
BIN     := bin/infermatrix
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
PKG     := github.com/infermatrix/infermatrix
LDFLAGS := -s -w -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT)

.PHONY: help build demo test lint fmt bench fuzz schema tidy-check clean

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
test: SHELL := bash
test: lint
	$(GO) build -o bin/testsum ./internal/testsum
	set -o pipefail; $(GO) test -race -p 1 -json ./... | bin/testsum \
		-note 'INFERMATRIX_REQUIRE_SHARED=1 and INFERMATRIX_REQUIRE_CHROMIUM=1 (as .ci/run sets) turn a missing ../shared or Chromium into a failure instead of a skip.'

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

## clean: remove build output and runs
clean:
	rm -rf bin runs
