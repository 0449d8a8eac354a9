# Developer targets. CI does not run the benchmark: it needs root (for a
# private network namespace) and takes minutes. See docs/performance.md.
.PHONY: build bench bench-go fuzz

# The release binary: no symbol table or DWARF, no build paths.
build:
	go build -trimpath -ldflags="-s -w" -o certwatch ./cmd/certwatch

# Scans of a loopback TLS farm at 1k, 10k and 100k endpoints and a
# million-record zone transfer; prints one table. BENCH_FLAGS go to
# bench/run.sh, e.g. make bench BENCH_FLAGS='-n 10000 -r 5 -A'.
bench:
	bench/run.sh $(BENCH_FLAGS)

# The Go benchmarks: the probe path, and policy + JSON report of 100,000
# endpoints.
bench-go:
	go test -run '^$$' -bench . -benchmem ./probes ./internal/cli ./internal/jsonstream ./discovery/networks

# Every fuzz target for FUZZTIME (default 1m here; CI gives each 3s).
fuzz:
	FUZZTIME=$${FUZZTIME:-1m} bash .ci/fuzz
