# balde: two commands do everything on a fresh machine.
#   make run   start the app on SQLite (balde.db) with the DICT and SIFEN simulators
#   make test  run every test (PostgreSQL ones when BALDE_TEST_POSTGRES_DSN is set)

GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.Version=$(VERSION)

.PHONY: run test test-under-load test-tools race bench bench-ab bench-peers lint build image image-context image-check fuzz soak reliability clean

# The simulators keep their ports across restarts, clear of the gateways'
# defaults (8081 DICT, 8082 SIFEN): DICT_SIM_ADDR and SIFEN_SIM_ADDR move
# them (make run DICT_SIM_ADDR=127.0.0.1:9091), as BALDE_DICT_SIM_ADDR and
# BALDE_SIFEN_SIM_ADDR in the environment do. The binary is built first and
# run in the foreground: Ctrl-C stops it cleanly, and make says nothing.
DICT_SIM_ADDR  ?= $(or $(BALDE_DICT_SIM_ADDR),127.0.0.1:8091)
SIFEN_SIM_ADDR ?= $(or $(BALDE_SIFEN_SIM_ADDR),127.0.0.1:8092)
run: build
	./bin/balde serve --dict-sim-addr $(DICT_SIM_ADDR) --sifen-sim-addr $(SIFEN_SIM_ADDR)

# test-tools/ holds the third-party SIFEN tools some tests run (the DE
# generator, signer and SOAP client, pinned by package-lock.json); without
# npm those tests skip, saying so.
test: test-tools
	$(GO) test -count=1 -timeout 9m ./...

# The flake check of docs/RELIABILITY.md: make test RUNS times in a row
# (default 5) beside HOGS busy processes (default 2), stopping at the first
# failure; logs in test-under-load.N.log.
test-under-load:
	RUNS=$(or $(RUNS),5) HOGS=$(or $(HOGS),2) MAKE="$(MAKE)" sh scripts/test-under-load.sh

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

# balde beside redis_rate, ulule/limiter (Redis) and sethvargo/go-limiter
# (memory), in one run: bench/peers is a module of its own (the peers'
# dependencies stay out of go.mod). Redis on 127.0.0.1:6379; PostgreSQL rows
# need BALDE_TEST_POSTGRES_DSN. Then, with npm, node-rate-limiter-flexible on
# the same PostgreSQL and on a temporary SQLite file (bench/peers/node, pinned
# by its package-lock.json; its SQLite rows need better-sqlite3, whose native
# module npm ci downloads or builds, and are skipped, saying so, without it).
# Table in docs/BENCHMARKS.md ("Peers").
PEERSCOUNT ?= 3
bench-peers:
	cd bench/peers && $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -count $(PEERSCOUNT) -timeout 60m . | tee ../../bench-peers.out
	@if command -v npm >/dev/null && [ -n "$$BALDE_TEST_POSTGRES_DSN" ]; then \
		npm ci --prefix bench/peers/node --no-audit --no-fund --loglevel=error && \
		for i in $$(seq $(PEERSCOUNT)); do PGURL="$$BALDE_TEST_POSTGRES_DSN" node bench/peers/node/bench.js; done | tee -a bench-peers.out; \
	else echo "make: npm or BALDE_TEST_POSTGRES_DSN missing: node-rate-limiter-flexible skipped"; fi

# gofmt, go vet and staticcheck (a tool of go.mod: `go tool` builds the
# pinned version, so nothing is installed by hand).
lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/balde ./cmd/balde

# The container image of the Dockerfile: `make image` stages its context in
# bin/image (a static binary, the CA bundle, the non-root user) and builds
# balde:latest with buildah (no daemon), else podman, else docker (or name
# one: make image BUILDER=docker). `make image-check` runs the built image's
# binary as the README's container example does (scripts/image-check.sh).
BUILDER ?= $(shell if command -v buildah >/dev/null; then echo "buildah --storage-driver vfs"; elif command -v podman >/dev/null; then echo podman; else echo docker; fi)
image-context:
	GO=$(GO) VERSION=$(VERSION) sh scripts/image-context.sh bin/image
image: image-context
	$(BUILDER) build -t localhost/balde:latest -f Dockerfile bin/image
image-check: image
	GO=$(GO) bash scripts/image-check.sh

# Every fuzz target for FUZZTIME each (the seed corpora run in make test).
FUZZTIME ?= 60s
FUZZ_TARGETS = \
	./throttle:FuzzRefillIsExact ./internal/inspect:FuzzDecodeCursor ./internal/inspect:FuzzParseCondition \
	./dict:FuzzParseKey ./dict:FuzzParseCNPJ ./dict:FuzzParseCPF ./dict:FuzzDecodeProblem \
	./dict:FuzzDecodeListPolicies ./dict:FuzzParsePolicyFile ./dict:FuzzParseRetryAfter ./dict:FuzzDecodeAnswers \
	./sifen:FuzzParseLote ./sifen:FuzzRUCCheckDigit ./sifen:FuzzUnmarshalSOAP \
	./web:FuzzParseInboundTokens ./web:FuzzClientIP \
	./dict:FuzzReadLookupRequests
# FUZZPARALLEL workers each (the machine may be shared); the last line of
# each target is its exec count, collected in fuzz.out for the record.
FUZZPARALLEL ?= 1
fuzz:
	@set -e; : > fuzz.out; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$pkg $$name ($(FUZZTIME))"; \
		s=0; $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s -parallel $(FUZZPARALLEL) $$pkg > fuzz.last 2>&1 || s=$$?; \
		cat fuzz.last; echo "$$pkg $$name $$(grep -o 'execs: [0-9]*' fuzz.last | tail -1) $$(tail -1 fuzz.last)" >> fuzz.out; \
		[ $$s -eq 0 ] || exit $$s; \
	done; rm -f fuzz.last; echo "== exec counts (fuzz.out)"; cat fuzz.out

# A longer exactness run: the cross-process hammer tests, repeated.
SOAKCOUNT ?= 20
soak:
	$(GO) test -count $(SOAKCOUNT) -timeout 60m -run 'TestExactAcrossProcesses|TestLedgerExplainsConcurrentHistory|TestGroupCommit' ./throttle/...

# The reliability suite of docs/RELIABILITY.md, long versions (minutes; the
# short versions run in make test): sifen-send, serve and dict-lookup each killed with SIGKILL 50 times
# per engine, PostgreSQL sessions terminated every 30 ms for 60 s under web
# and batch load, the readiness and file-identity checks, the migration
# lock, migrate up killed 100 times per engine, empty and corrupt SQLite
# files, a stopped lock holder on both engines, a private PostgreSQL server
# restarted (initdb, as the postgres user) and a full tmpfs (both need
# root; they skip saying so without it), 16 ZIP bombs at the SIFEN gateway,
# a soak of SOAK (default 30m) sampled every 10 s into soak.csv, setapi
# and the Python client through the SIFEN gateway at SIFEN's 10 s interval;
# then every fuzz target for FUZZTIME. PostgreSQL parts need
# BALDE_TEST_POSTGRES_DSN (they skip without it).
SOAK ?= 30m
reliability:
	@: > reliability.out
	BALDE_RELIABILITY=1 $(GO) test -count=1 -timeout 30m -v \
		-run 'TestCrashSifenSend|TestCrashServe|TestCrashDictLookup|TestStoreFaultsPostgres|TestSQLiteImmutable|TestSQLiteWritesFailUnderServe|TestHostileUploads|TestReadinessFailsWhenTheFileIsDeleted|TestServeRefuses|TestConcurrentFirstStartMigratesOnce|TestKillDuringMigrateUp|TestEveryCommandRefusesABadFile|TestStoppedLockHolder|TestPostgresServerRestart|TestFullDisk|TestSifenGatewayMemoryUnderZipBombs' \
		./cmd/balde >> reliability.out 2>&1; s=$$?; grep -E '^(---|ok|FAIL)|_test.go:[0-9]+: ' reliability.out | grep -v WARN; exit $$s
	BALDE_RELIABILITY=1 $(GO) test -count=1 -timeout 30m -v \
		-run 'TestTakeSurvivesTerminatedConnections|TestTakeWaitsOutABusySQLite|TestCheckWrite|TestDeletedSQLiteFileIsDetected|TestAWaitOnAStoppedLockHolderIsBounded|TestOpenRefusesABadFile|TestCorruptionFoundWhileOpenRefusesEverything' \
		./throttle/sqlstore > reliability.sqlstore.out 2>&1; s=$$?; cat reliability.sqlstore.out >> reliability.out; grep -E '^(---|ok|FAIL)' reliability.sqlstore.out; rm -f reliability.sqlstore.out; exit $$s
	BALDE_RELIABILITY=1 BALDE_SOAK_DURATION=$(SOAK) BALDE_SOAK_CSV=$(CURDIR)/soak.csv $(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' \
		./cmd/balde > reliability.soak.out 2>&1; s=$$?; cat reliability.soak.out >> reliability.out; grep -E '^(---|ok|FAIL)|_test.go:[0-9]+: ' reliability.soak.out; rm -f reliability.soak.out; exit $$s
	BALDE_RELIABILITY=1 $(GO) test -count=1 -timeout 30m -v -run 'TestSifenGatewayServesSetapi|TestSifenGatewayServesPythonProcesses' \
		./web > reliability.web.out 2>&1; s=$$?; cat reliability.web.out >> reliability.out; grep -E '^(---|ok|FAIL)|_test.go:[0-9]+: ' reliability.web.out; rm -f reliability.web.out; exit $$s
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

clean:
	rm -rf test-under-load.*.log bin bench.out bench-ab.out bench-before.test bench-after.test fuzz.out fuzz.last reliability.out soak.csv
