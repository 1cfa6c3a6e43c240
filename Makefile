# SealedPush — the two README commands are `make demo` and `make test`.
SWIFT ?= swift
PYTHON ?= python3
VENV := .build/pyenv
PY := $(VENV)/bin/python
# Extra flags for `swift test` (e.g. SWIFT_TEST_FLAGS=--sanitize=address).
SWIFT_TEST_FLAGS ?=
FUZZ_SECONDS ?= 30

.PHONY: all deps pydeps build release demo test bench fuzz sanitize clean

all: build

# libsodium-dev is the one system library SealedPush needs. Installed here when missing and we are root.
deps:
	@if ! pkg-config --exists libsodium 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "libsodium-dev is missing: installing it with apt-get"; \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y libsodium-dev pkg-config; \
	  else \
	    echo "libsodium-dev is missing. Install it with: sudo apt-get update && sudo apt-get install -y libsodium-dev pkg-config" >&2; \
	    exit 1; \
	  fi; \
	fi

# The Python peers, in a venv under .build/: PyNaCl (interoperability tests, the PyNaCl benchmark),
# cryptography (an independent check of the APNs provider token's ES256 signature) and h2 (a raw HTTP/2
# client that checks the local APNs's frames).
pydeps:
	@if ! [ -x $(PY) ] || ! $(PY) -c 'import nacl, cryptography, h2' 2>/dev/null; then \
	  echo "setting up $(VENV) with PyNaCl, cryptography and h2"; \
	  $(PYTHON) -m venv $(VENV) && $(PY) -m pip install --quiet --disable-pip-version-check 'pynacl>=1.5' 'cryptography>=41' 'h2>=4'; \
	fi

build: deps
	$(SWIFT) build

# Release builds are fully static executables (`-static-executable`: the Swift runtime, Foundation,
# libsodium and glibc linked in, no dynamic loader, no relocations to apply at start): device push's
# peak RSS went from about 18 MiB (static Swift runtime, dynamic PIE) to about 12 MiB, most of the
# difference being the loader relocating the big binary's data (docs/benchmarks.md). lld, from the
# toolchain, links them without ld.gold's warnings.
RELEASE_FLAGS ?= -c release --static-swift-stdlib -Xswiftc -static-executable -Xswiftc -use-ld=lld

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

demo: release
	.build/release/sealedpush demo

test: deps pydeps
	$(SWIFT) build --build-tests $(SWIFT_TEST_FLAGS)
	SEALEDPUSH_PYTHON=$(CURDIR)/$(PY) $(SWIFT) test --skip-build $(SWIFT_TEST_FLAGS)

# `make bench`: release build in its own scratch path, the Swift benchmark pinned to one CPU (saved as
# JSON), then the same work in PyNaCl and one combined table with each target met or NOT met.
BENCH_SCRATCH ?= .build/bench
BENCH_PIN ?= $(shell command -v taskset >/dev/null 2>&1 && echo taskset -c 0)
bench: deps pydeps
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH) --product sealedpush
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH) --product sealedpush-bench
	$(BENCH_PIN) $(BENCH_SCRATCH)/release/sealedpush-bench --json > $(BENCH_SCRATCH)/bench.json
	$(BENCH_PIN) $(PY) Tests/Peer/bench_pynacl.py --swift-json $(BENCH_SCRATCH)/bench.json
	# Receipts (issue #14): device push with and without a receipt, and the collector under load (both cores:
	# the load generator and the collector are separate processes).
	$(PYTHON) Tests/Peer/bench_receipts.py $(BENCH_SCRATCH)/release/sealedpush
	$(MAKE) --no-print-directory bench-media
	$(MAKE) --no-print-directory bench-send

# `make bench-send` (run by `make bench`): delivery (issue #12) — `send --batch` of 20 000 pushes to a local APNs
# against the raw crypto_box_seal loop, against PyNaCl + aioapns (installed into the venv here), and send's peak RSS.
.PHONY: bench-send
bench-send: deps pydeps
	@$(PY) -c 'import aioapns' 2>/dev/null || $(PY) -m pip install --quiet --disable-pip-version-check 'aioapns>=3'
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH) --product sealedpush
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH) --product sealedpush-bench
	$(PY) Tests/Bench/bench_send.py --bin $(BENCH_SCRATCH)/release/sealedpush --bench-bin $(BENCH_SCRATCH)/release/sealedpush-bench --python $(PY)

# `make bench-media` (run by `make bench`): encrypted media attachments — device push peak RSS with a 10 MB image
# and a 50 MB movie from `media serve` on loopback, and media encrypt/decrypt throughput against raw libsodium
# secretstream loops (sealedpush-media-bench); each stated met or NOT met. Needs the networking modules.
.PHONY: bench-media
bench-media: deps
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH) --product sealedpush
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(BENCH_SCRATCH) --product sealedpush-media-bench
	$(PYTHON) Tests/Bench/bench_media.py --bin $(BENCH_SCRATCH)/release/sealedpush --media-bench $(BENCH_SCRATCH)/release/sealedpush-media-bench

# libFuzzer harnesses (Fuzz/, see docs/hardening.md): built with SEALEDPUSH_FUZZ=1 and
# -sanitize=fuzzer,address in .build/fuzz, seeded from the shared vectors and freshly sealed messages,
# each run for FUZZ_SECONDS (default 30); the corpus grows in .build/fuzz-corpus across runs.
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) SWIFT=$(SWIFT) Fuzz/fuzz.sh all

# The CI form: every harness for a few seconds from the seeds alone (a fresh corpus directory).
.PHONY: fuzz-smoke
fuzz-smoke: deps
	rm -rf .build/fuzz-smoke-corpus
	FUZZ_SECONDS=$${FUZZ_SMOKE_SECONDS:-8} FUZZ_CORPUS=.build/fuzz-smoke-corpus SWIFT=$(SWIFT) Fuzz/fuzz.sh all

# The whole test suite under AddressSanitizer (.build/asan), then ThreadSanitizer (.build/tsan).
# Both always run; the target fails if either does. Logs: .build/asan.log, .build/tsan.log.
# Leaks inside the toolchain's own libraries are suppressed (Fuzz/lsan-suppressions.txt).
# Linked with the toolchain's lld: ld.gold prints a warning per sanitizer runtime symbol it cannot export.
# `make sanitize SANITIZERS=address` runs one of them.
SANITIZERS ?= address thread
sanitize: deps pydeps
	@status=0; \
	for san in $(SANITIZERS); do \
	  dir=.build/$$( [ $$san = address ] && echo asan || echo tsan ); \
	  echo "== $$san sanitizer ($$dir)"; \
	  if $(SWIFT) build --build-tests --scratch-path $$dir --sanitize=$$san -Xswiftc -use-ld=lld; then \
	    SWIFT_BACKTRACE=enable=no SEALEDPUSH_PYTHON=$(CURDIR)/$(PY) \
	      LSAN_OPTIONS=suppressions=$(CURDIR)/Fuzz/lsan-suppressions.txt:print_suppressions=0 \
	      $(SWIFT) test --skip-build --scratch-path $$dir --sanitize=$$san >$$dir.log 2>&1; rc=$$?; \
	    grep -E "(Test run with|Executed [0-9]+ tests|SUMMARY: [A-Za-z]+Sanitizer)" $$dir.log | tail -n 6; \
	    if [ $$rc -eq 0 ] && ! grep -qE "^(==[0-9]+==ERROR|WARNING: ThreadSanitizer)" $$dir.log; then \
	      echo "== $$san sanitizer: clean"; \
	    else \
	      echo "== $$san sanitizer: FAILED, exit $$rc (see $$dir.log)"; status=1; \
	    fi; \
	  else \
	    echo "== $$san sanitizer: build FAILED"; status=1; \
	  fi; \
	done; exit $$status

clean:
	rm -rf .build
