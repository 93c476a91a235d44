#!/usr/bin/env bash
# Runs every benchmark suite with short measurement times and prints one markdown
# report: the machine, one table of criterion medians with ratios to cutout (same
# run, same suite), the callgrind instruction counts (benches/instructions.sh), the
# call shapes timed in pairs (examples/paired.rs) and the memory figures
# (examples/memory.rs).
#
# Timings on a shared or 2-vCPU machine are noisy: read the ratios and the
# instruction counts, and look at the load average printed with them.
#
# Usage: benches/report.sh > report.md
# env:   WARMUP (s, default 0.5), MEASURE (s, default 1), CONTENDED_RUNS (default 3),
#        SUITES (default: all seven), NO_INSTRUCTIONS=1 to skip callgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
WARMUP=${WARMUP:-0.5}
MEASURE=${MEASURE:-1}
CONTENDED_RUNS=${CONTENDED_RUNS:-3}
SUITES=${SUITES:-"closed_success open_reject failure_path half_open contended future registry"}
CRITERION=target/criterion
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cargo bench -q --no-run 2>"$TMP/build.log" || { cat "$TMP/build.log" >&2; exit 1; }
cargo build -q --profile bench --examples
cargo build -q --profile bench --example paired --features tower

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
runs=()
mkdir -p "$TMP/single"
for suite in $SUITES; do
    n=1
    [[ $suite == contended ]] && n=$CONTENDED_RUNS
    for i in $(seq 1 "$n"); do
        echo "running $suite ($i/$n)" >&2
        rm -rf "${CRITERION:?}/$suite"
        cargo bench -q --bench "$suite" -- --warm-up-time "$WARMUP" \
            --measurement-time "$MEASURE" >"$TMP/$suite.$i.log" 2>&1 ||
            { cat "$TMP/$suite.$i.log" >&2; exit 1; }
        if [[ $suite == contended ]]; then
            cp -r "$CRITERION/contended" "$TMP/contended.$i"
            runs+=("$TMP/contended.$i")
        else
            cp -r "$CRITERION/$suite" "$TMP/single/$suite"
        fi
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

source benches/cpu.sh
echo "## Benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- machine: $(cpu_line), $(uname -sr)"
echo "- rustc: $(rustc --version)"
echo "- load average (1, 5, 15 min) before: $load_before, after: $load_after"
echo "- criterion: warm-up ${WARMUP} s, measurement ${MEASURE} s per benchmark; medians."
echo "  Single-threaded suites measure the thread's CPU time (time descheduled by other"
echo "  load is not counted); the contended suite measures wall time."
echo "  Ratios are implementation / cutout in the same run: above 1 means cutout is faster."
echo "  Contended: each thread makes the same number of calls; 'aggregate' is wall time"
echo "  from the first thread's start to the last one's finish over all calls made, 'per"
echo "  thread' is that wall time over one thread's calls; median of $CONTENDED_RUNS runs."
echo
python3 benches/report_table.py "$TMP/single" "${runs[@]}"

if [[ -z ${NO_INSTRUCTIONS:-} ]]; then
    echo
    echo "### Instructions per call (callgrind; locked = lock-prefixed instructions executed)"
    bash benches/instructions.sh --no-pieces
fi

echo
echo "### Call shapes timed in pairs (examples/paired.rs)"
echo
echo '```'
target/release/examples/paired 1000
echo '```'

echo
echo "### Memory"
echo
target/release/examples/memory
echo
target/release/examples/memory per-key 64
