# octflow — the two commands a newcomer needs are `make dev` and `make test`.

export GOTOOLCHAIN := local
# go-nvml compiles NVML headers that mark old calls deprecated; the warnings are noise.
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations
GO      ?= go
BIN     := bin/octflow
DATA    ?= .data

# Packages that do not link the embedded Temporal server: their tests run
# under the race detector.
UNIT = $(shell $(GO) list ./... | grep -v -e /cmd/octflow -e /internal/devstack -e /internal/devsystem)
WORKFLOWCHECK := go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0
# The end-to-end tests (e2e) and the commands' own tests (internal/cli),
# which link the embedded server too.
E2E = $(GO) test -p 1 -count=1 -timeout 30m ./internal/devstack ./cmd/octflow/...

.PHONY: dev test build vet workflowcheck deploy-check fmt-check fuzz accuracy bench phantom submit clean

## dev: run the whole system (embedded Temporal + Web UI + S3, API, workers, 2 simulated GPU nodes)
dev: build
	$(BIN) dev --data-dir $(DATA)

## deploy-check: the production stack's Prometheus config and alert rules,
## checked and unit-tested with promtool, and the Alertmanager example
## checked with amtool
deploy-check:
	promtool check config deploy/prometheus/prometheus.yml
	promtool test rules deploy/prometheus/tests/octflow_test.yml
	amtool check-config deploy/alertmanager/alertmanager.example.yml

## test: format, vet and workflowcheck; the unit tests once under the race
## detector; the imaging accuracy run; the end-to-end tests on the embedded
## stack; a short fuzz of the DICOM reader, the image stages and the upload
## intake; one pass of the benchmarks
test: fmt-check vet workflowcheck deploy-check openapi-lint
	@# Build every test binary in parallel first.
	$(GO) test -count=1 -run '^$$' ./... > /dev/null
	@# -failfast: a package's first failing test ends its run, so a
	@# broken safety property fails within seconds, not after the slow
	@# stage tests.
	$(GO) test -race -short -failfast -count=1 $(UNIT)
	@# The full-size accuracy run needs both cores at full speed, not -race;
	@# the pre-scan's memory estimate is checked against what reading
	@# allocates, which the race detector would inflate.
	$(GO) test -count=1 -run 'Accuracy|PreScanPeak' ./imaging
	@# The end-to-end tests (E2E) one package at a time, so nothing
	@# starves their timing. The embedded servers log at length, so a
	@# failing test's lines are said again at the end (the whole output
	@# is in .cache/e2e.log): the last lines of a CI log name the test
	@# that failed, or, on a timeout, the tests still running.
	@mkdir -p .cache
	@echo '$(E2E)'
	@bash -o pipefail -c '$(E2E) 2>&1 | tee .cache/e2e.log' || \
		{ echo "== what failed in the end-to-end tests (the whole output: .cache/e2e.log):"; \
		  grep -E -- '--- FAIL|^ +[A-Za-z0-9_.-]+\.go:[0-9]+: |^panic: |^running tests:|^[[:space:]]+Test[A-Za-z0-9_/]* \([0-9hms.]+\)$$|^FAIL|^ok ' .cache/e2e.log | cut -c1-600 | tail -300; exit 1; }
	@# Counted executions, not seconds: Go 1.26's fuzz coordinator can fail
	@# a target with "context deadline exceeded" when a -fuzztime duration
	@# runs out under load (go.dev/issue/75804, fixed in Go 1.27).
	$(MAKE) fuzz FUZZ_DICOM=200000x FUZZ_STAGES=2000x FUZZ_INTAKE=20000x
	$(GO) test -run '^$$' -bench . -benchtime 1x ./imaging

SPECTRAL_VERSION := 6.16.3
SPECTRAL := .cache/spectral/node_modules/.bin/spectral
## openapi-lint: Stoplight Spectral's OpenAPI ruleset (spectral:oas, see
## .spectral.yaml) on api/openapi.yaml, failing on any warning; installs
## the pinned @stoplight/spectral-cli from npm into .cache/spectral once
.PHONY: openapi-lint
openapi-lint:
	@if [ "$$($(SPECTRAL) --version 2>/dev/null)" != "$(SPECTRAL_VERSION)" ]; then \
		echo "installing @stoplight/spectral-cli@$(SPECTRAL_VERSION) into .cache/spectral"; \
		npm install --prefix .cache/spectral --no-audit --no-fund --loglevel=error @stoplight/spectral-cli@$(SPECTRAL_VERSION); \
	fi
	$(SPECTRAL) lint --ruleset .spectral.yaml --fail-severity=warn api/openapi.yaml

## workflowcheck: Temporal's static check that workflow code is deterministic
workflowcheck:
	$(GO) run $(WORKFLOWCHECK) ./workflows/...

FUZZTIME ?= 2m
FUZZ_DICOM ?= $(FUZZTIME)
FUZZ_STAGES ?= $(FUZZTIME)
FUZZ_INTAKE ?= $(FUZZTIME)
## fuzz: fuzz the DICOM reader, every image stage on volumes no eye
## produced, and the gateway's whole intake of an upload (multipart,
## metadata, DICOM, de-identification), FUZZTIME each (default 2m)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzReadDICOM$$' -fuzztime $(FUZZ_DICOM) ./octdicom
	$(GO) test -run '^$$' -fuzz '^FuzzStages$$' -fuzztime $(FUZZ_STAGES) ./imaging
	$(GO) test -run '^$$' -fuzz '^FuzzSubmitIntake$$' -fuzztime $(FUZZ_INTAKE) ./api/intake

## bench: time each imaging stage and the whole 49 × 496 × 512 volume (the README's figures)
## accuracy: the long accuracy run, ACCURACY_SEEDS full-size phantoms (default
## 30) in every export, printing the worst case of each figure (not in CI)
ACCURACY_SEEDS ?= 30
accuracy:
	OCTFLOW_ACCURACY_SEEDS=$(ACCURACY_SEEDS) $(GO) test -count=1 -timeout 60m -run '^TestAccuracyOverManySeeds$$' -v ./imaging

bench:
	$(GO) test -run '^$$' -bench . -benchtime 5x -benchmem ./imaging

# The version is the repository's VERSION file; the commit is stamped in
# beside it (`octflow version`; the Worker Deployment build ID is both).
VERSION := $(shell cat VERSION)
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X octflow/internal/buildinfo.version=$(VERSION) -X octflow/internal/buildinfo.commit=$(COMMIT)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/octflow

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## phantom: write a synthetic exam to exam.dcm (with fluid and drusen) and its ground truth to truth.json
phantom: build
	$(BIN) phantom --out exam.dcm --truth truth.json --seed 1 --fluid --drusen

## submit: send exam.dcm to the running `make dev` and wait for its report
submit: build
	$(BIN) submit --api http://127.0.0.1:8080 --dev-tokens $(DATA)/dev-tokens.json --file exam.dcm --wait

clean:
	rm -rf bin

.PHONY: compose-test
## compose-test: set a clean directory up with deploy/init.sh, bring
## docker-compose.yml up on a real Docker Engine with stand-in images built
## on this machine (no registry is needed) and up again from a clean
## shell, submit exams through the api's published port and see each
## COMPLETED with one report; drill the alerts to a webhook receiver;
## back it up with exams in flight, destroy its volumes, restore
## it and see them back; then take the stack down (deploy/compose-test/run.sh; installs
## Docker Engine, Compose v2 and debootstrap where missing; root)
compose-test:
	deploy/compose-test/run.sh
