# balde: two commands do everything on a fresh machine.
#   make run   start the app on SQLite (balde.db) with the DICT and SIFEN simulators
#   make test  run every test (PostgreSQL ones when BALDE_TEST_POSTGRES_DSN is set)

GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.Version=$(VERSION)

.PHONY: run test race bench lint build fuzz soak clean

run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/balde serve

test:
	$(GO) test -count=1 -timeout 9m ./...

# The race detector over the packages with concurrency of their own.
race:
	$(GO) test -count=1 -race -timeout 20m ./throttle/... ./web/...

# Benchmarks, side by side in one run; results go to docs/BENCHMARKS.md by hand
# with the machine and the date.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 -timeout 60m ./throttle/... | tee bench.out

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/balde ./cmd/balde

fuzz:
	@echo "no fuzz targets yet"

soak:
	@echo "no soak test yet"

clean:
	rm -rf bin bench.out
