#!/usr/bin/env bash
# Builds the libFuzzer harnesses (the Fuzz package) under Fuzz/.build and runs each for FUZZ_SECONDS.
#
#   Fuzz/fuzz.sh [build|run|all]      (make fuzz / make fuzz-smoke call `all`)
#
# Environment: FUZZ_SECONDS (default 30) per target; FUZZ_TARGETS (default: every harness);
# FUZZ_CORPUS (default .build/fuzz-corpus) where each target's corpus grows across runs;
# FUZZ_JOBS (default 1) parallel libFuzzer workers per target; SWIFT (default swift).
# A crash, leak, timeout or invariant failure stops with a non-zero exit and leaves the input in
# .build/fuzz-artifacts/<target>-crash-<sha1>; reproduce with `Fuzz/.build/debug/<target> <file>`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SWIFT=${SWIFT:-swift}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
FUZZ_TARGETS=${FUZZ_TARGETS:-"FuzzPayload FuzzOpen FuzzKeyRecord FuzzKeychainItem FuzzMedia FuzzReceipts FuzzOutbox"}
FUZZ_CORPUS=${FUZZ_CORPUS:-.build/fuzz-corpus}
SCRATCH=$ROOT/Fuzz/.build
SEEDS=.build/fuzz-seeds
ARTIFACTS=.build/fuzz-artifacts
LOGS=.build/fuzz-logs
# libFuzzer reports crashes itself; Swift's backtracer would otherwise fork a helper per crash.
export SWIFT_BACKTRACE=enable=no
# lld: ld.gold prints a warning per ASan runtime symbol it cannot export.
BUILD_FLAGS=(--package-path Fuzz -c debug --scratch-path "$SCRATCH" -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)

build() {
    for target in $FUZZ_TARGETS; do
        echo "== building $target"
        "$SWIFT" build "${BUILD_FLAGS[@]}" --product "$target"
    done
}

run() {
    mkdir -p "$ARTIFACTS" "$LOGS"
    local bin
    bin=$("$SWIFT" build "${BUILD_FLAGS[@]}" --show-bin-path)
    local summary=()
    for target in $FUZZ_TARGETS; do
        rm -rf "${SEEDS:?}/$target"
        mkdir -p "$FUZZ_CORPUS/$target"
        # Seeds: the shared vectors' encrypted_data (read now from ../shared) and messages sealed now.
        SEALEDPUSH_FUZZ_GENERATE="$SEEDS/$target" "$bin/$target" >/dev/null
        echo "== fuzzing $target for ${FUZZ_SECONDS}s ($(ls "$SEEDS/$target" | wc -l) seeds, $(ls "$FUZZ_CORPUS/$target" | wc -l) corpus files)"
        local status=0
        "$bin/$target" "$FUZZ_CORPUS/$target" "$SEEDS/$target" \
            -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=10 -max_len=8192 \
            -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$target-" >"$LOGS/$target.log" 2>&1 || status=$?
        local done_line stats_runs cov corpus
        done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)' "$LOGS/$target.log" | tail -1 || true)
        stats_runs=$(grep -E '^stat::number_of_executed_units' "$LOGS/$target.log" | awk '{print $2}' || true)
        cov=$(echo "$done_line" | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
        corpus=$(ls "$FUZZ_CORPUS/$target" | wc -l)
        summary+=("$target: ${stats_runs:-?} executions, ${cov:-cov ?}, corpus $corpus files, exit $status")
        if [ "$status" -ne 0 ]; then
            echo "!! $target failed (exit $status); log: $LOGS/$target.log"
            grep -E 'ERROR|invariant|Fatal error|Precondition|SUMMARY|Test unit written' "$LOGS/$target.log" | head -20 || true
            printf '%s\n' "${summary[@]}"
            exit "$status"
        fi
    done
    echo "== summary"
    printf '%s\n' "${summary[@]}"
}

case "${1:-all}" in
    build) build ;;
    run) run ;;
    all) build; run ;;
    *) echo "usage: $0 [build|run|all]" >&2; exit 2 ;;
esac
