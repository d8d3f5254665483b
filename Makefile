# octflow — the two commands a newcomer needs are `make dev` and `make test`.

export GOTOOLCHAIN := local
# go-nvml compiles NVML headers that mark old calls deprecated; the warnings are noise.
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations
GO      ?= go
BIN     := bin/octflow
DATA    ?= .data

.PHONY: dev test build vet fmt-check fuzz bench phantom submit clean

## dev: run the whole system (embedded Temporal + Web UI + S3, API, workers, 2 simulated GPU nodes)
dev: build
	$(BIN) dev --data-dir $(DATA)

## test: vet, format check, every test (unit, accuracy, workflow, end-to-end on the
## embedded stack), a short fuzz of the DICOM reader and one pass of the imaging benchmarks
test: fmt-check vet
	@# Build every test binary in parallel first, then run the packages one
	@# at a time: the imaging accuracy tests take both cores for half a minute
	@# and must not starve the end-to-end tests' timing.
	$(GO) test -count=1 -run '^$$' ./... > /dev/null
	$(GO) test -p 1 -count=1 -timeout 30m ./...
	$(MAKE) fuzz FUZZTIME=15s
	$(GO) test -run '^$$' -bench . -benchtime 1x ./imaging

FUZZTIME ?= 2m
## fuzz: fuzz the DICOM reader (FUZZTIME, default 2m)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzReadDICOM$$' -fuzztime $(FUZZTIME) ./imaging

## bench: time each imaging stage and the whole 49 × 496 × 512 volume (the README's figures)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 5x -benchmem ./imaging

build:
	$(GO) build -o $(BIN) ./cmd/octflow

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
