# balde: two commands do everything on a fresh machine.
#   make run   start the app on SQLite (balde.db) with the DICT and SIFEN simulators
#   make test  run every test (PostgreSQL ones when BALDE_TEST_POSTGRES_DSN is set)

GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.Version=$(VERSION)

.PHONY: run test test-tools race bench bench-ab lint build fuzz soak clean

run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/balde serve

# test-tools/ holds the third-party SIFEN tools some tests run (the DE
# generator, signer and SOAP client, pinned by package-lock.json); without
# npm those tests skip, saying so.
test: test-tools
	$(GO) test -count=1 -timeout 9m ./...

test-tools:
	@if command -v npm >/dev/null; then npm ci --prefix test-tools --no-audit --no-fund --loglevel=error; else echo "make: npm not found: the tests with real SIFEN documents will skip"; fi

# The race detector over the packages with concurrency of their own.
race:
	$(GO) test -count=1 -race -timeout 20m ./throttle/... ./web/...

# Benchmarks, side by side in one run: the bare UPDATE/upsert ceiling, balde's
# decisions (naive and group commit), x/time/rate, redis_rate and the scanning
# attack, 5 times each, summarized as medians by benchstat. PostgreSQL and Redis
# rows need BALDE_TEST_POSTGRES_DSN and a Redis on 127.0.0.1:6379. The numbers
# go to docs/BENCHMARKS.md by hand, with the machine and the date.
BENCH      ?= .
BENCHTIME  ?= 2s
BENCHCOUNT ?= 5
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 120m ./throttle/sqlstore/ ./web/ | tee bench.out
	$(GO) tool benchstat -col /callers bench.out || $(GO) tool benchstat bench.out

# Before/after, interleaved: the test binaries of BEFORE (a commit) and of
# the work tree run BENCH alternately, one process each, ROUNDS times, so
# that other load on the machine hits both alike; compare ratios taken
# inside one process (docs/BENCHMARKS.md, round two). Make expands "$" in
# BENCH: anchor a pattern with "$$" (BENCH='Decision/sqlite/naive/1key/callers=1$$').
BEFORE ?= main
ROUNDS ?= 3
bench-ab:
	@set -e; d=$$(mktemp -d); git archive $(BEFORE) | tar -x -C $$d; \
	(cd $$d && $(GO) test -c -o $(CURDIR)/bench-before.test ./throttle/sqlstore/); rm -rf $$d; \
	$(GO) test -c -o bench-after.test ./throttle/sqlstore/; rm -f bench-ab.out; \
	for i in $$(seq $(ROUNDS)); do for v in before after; do \
		./bench-$$v.test -test.run '^$$' -test.bench '$(BENCH)' -test.benchtime $(BENCHTIME) -test.count 1 -test.timeout 60m \
			| sed "s/^Benchmark/$$v\/round$$i\/Benchmark/" | tee -a bench-ab.out; \
	done; done

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/balde ./cmd/balde

# Every fuzz target for FUZZTIME each (the seed corpora run in make test).
FUZZTIME ?= 60s
FUZZ_TARGETS = \
	./throttle:FuzzRefillIsExact \
	./dict:FuzzParseKey ./dict:FuzzParseCNPJ ./dict:FuzzParseCPF ./dict:FuzzDecodeProblem \
	./dict:FuzzDecodeListPolicies ./dict:FuzzParsePolicyFile \
	./sifen:FuzzParseLote ./sifen:FuzzRUCCheckDigit \
	./web:FuzzParseInboundTokens ./web:FuzzClientIP \
	./cmd/balde:FuzzReadLookups
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg; \
	done

# A longer exactness run: the cross-process hammer tests, repeated.
SOAKCOUNT ?= 20
soak:
	$(GO) test -count $(SOAKCOUNT) -timeout 60m -run 'TestExactAcrossProcesses|TestLedgerExplainsConcurrentHistory|TestGroupCommit' ./throttle/...

clean:
	rm -rf bin bench.out bench-ab.out bench-before.test bench-after.test
