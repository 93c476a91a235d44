#!/usr/bin/env bash
# The same closed call (default window) under many memory layouts: its wall time
# as the heap position (HEAP_PAD) and the stack position (environment padding under
# `setarch -R`) move, inline and through a `&dyn Fn`. Prints min, median and max
# ps per call for each sweep, and every point with `-v`. Wall time: run it on a
# quiet machine. Each point is the best of REPS processes (each the best of five
# runs): a shared VM slows whole processes now and then, and a slowdown that is
# the layout's own shows in every run. See examples/layout.rs.
#
# Usage: benches/layout.sh [-v]      env: CALLS (default 20000000), STEP (64), REPS (3),
#        BIN (a layout binary built already: a machine without cargo, benches/device.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=${CALLS:-20000000}
STEP=${STEP:-64}
REPS=${REPS:-3}
VERBOSE=0
[[ "${1:-}" == "-v" ]] && VERBOSE=1
if [[ -z ${BIN:-} ]]; then
    cargo build -q --profile bench --example layout
    BIN=target/release/examples/layout
fi
echo "CPU: $(benches/cpu.sh)"
NORAND=""
if setarch "$(uname -m)" -R true 2>/dev/null; then NORAND="setarch $(uname -m) -R"; fi

# best COMMAND...: the least of REPS runs' figures.
best() {
    for _ in $(seq "$REPS"); do "$@"; done | sort -n | head -1
}

# summary NAME < values
summary() {
    sort -n | awk -v n="$1" '{ v[NR] = $1 } END {
        printf "%-34s min %6.2f  median %6.2f  max %6.2f ns  (max/min %.2f, %d layouts)\n",
            n, v[1] / 1000, v[int((NR + 1) / 2)] / 1000, v[NR] / 1000, v[NR] / v[1], NR }'
}

for shape in inline dyn; do
    for pad in $(seq 0 "$STEP" 4032); do
        t=$(best env HEAP_PAD="$pad" $NORAND "$BIN" "$shape" "$CALLS")
        [[ $VERBOSE == 1 ]] && echo "heap $shape $pad $t" >&2
        echo "$t"
    done | summary "heap position, $shape"
    for pad in $(seq 0 "$STEP" 4032); do
        t=$(best env -i PATH="$PATH" PAD="$(head -c "$pad" /dev/zero | tr '\0' x)" $NORAND "$BIN" "$shape" "$CALLS")
        [[ $VERBOSE == 1 ]] && echo "stack $shape $pad $t" >&2
        echo "$t"
    done | summary "stack position, $shape"
done
