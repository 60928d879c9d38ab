#!/usr/bin/env bash
# Runs one fuzz target for a while (see Fuzz/README.md), one process, at low priority:
#
#   Fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
#
# The corpus grows in .build/fuzz/corpus/TARGET (kept between runs; the seeds are read each time);
# a crash, hang or out-of-memory input is written to .build/fuzz/findings/. FUZZ_BUILD=.build/fuzz-smoke
# runs the smoke build instead.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=$1
SECONDS_TO_RUN=$2
shift 2
BUILD=${FUZZ_BUILD:-.build/fuzz}
BINARY=$BUILD/targets/$TARGET
[ -x "$BINARY" ] || { echo "no $BINARY: run Fuzz/build.sh first" >&2; exit 1; }

# Inputs larger than a real file of the kind add time, not paths.
case $TARGET in
    image) LIMITS=(-max_len=65536) ;;
    multipart) LIMITS=(-max_len=16384) ;;
    manifest) LIMITS=(-max_len=16384 -dict=Fuzz/json.dict) ;;
    metadata) LIMITS=(-max_len=4096 -dict=Fuzz/json.dict) ;;
    routes) LIMITS=(-max_len=16384 -dict=Fuzz/json.dict) ;;
    *) echo "unknown target $TARGET (Fuzz/Targets lists them)" >&2; exit 1 ;;
esac

mkdir -p "$BUILD/corpus/$TARGET" "$BUILD/findings"
# -timeout: one input that takes 10 s is a hang; -rss_limit_mb: 2 GB is an unbounded allocation.
# Swift's own crash backtracer would fight AddressSanitizer's report.
export SWIFT_BACKTRACE=enable=no
exec nice -n 10 "$BINARY" "$BUILD/corpus/$TARGET" "$BUILD/seeds/$TARGET" \
    -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$BUILD/findings/$TARGET-" "${LIMITS[@]}" "$@"
