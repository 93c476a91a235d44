#!/usr/bin/env bash
# The call-shape ratios (a shared helper, a `&dyn Fn`, against the inlined
# call) under several stack positions: `examples/paired.rs` at each position (the
# environment padded 0-3584 bytes, 512 apart, under `setarch -R`), each run the
# ratio of its fastest rounds. Prints, for each ratio, the most common value and
# the range over the positions. For code layouts, build the example with other
# RUSTFLAGS (for example `-C llvm-args=-align-loops=64`, `-align-all-functions=6`,
# `-align-all-nofallthru-blocks=5` or `-align-loops=32`) and pass its path as BIN.
#
# Usage: benches/paired.sh      env: BIN (default: a fresh bench build), ROUNDS (1000)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-1000}
if [[ -z ${BIN:-} ]]; then
    cargo build -q --profile bench --example paired --features tower
    BIN=target/release/examples/paired
fi
echo "CPU: $(benches/cpu.sh)"
NORAND=""
if setarch "$(uname -m)" -R true 2>/dev/null; then NORAND="setarch $(uname -m) -R"; fi

for pad in $(seq 0 512 3584); do
    # A ratio line: "  NAME  total MEDIAN (Q1-Q3) FASTEST  added ...".
    env -i PATH="$PATH" PAD="$(head -c "$pad" /dev/zero | tr '\0' x)" $NORAND \
        "$BIN" "$ROUNDS" 20000 sync |
        awk '/ total / { split($0, a, " total "); sub(/^ +/, "", a[1]); sub(/ +$/, "", a[1]);
                         split(a[2], b, " "); print a[1] "\t" b[3] }'
done | sort | awk -F'\t' '
    { n[$1]++; c[$1, $2]++; if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2; if ($2 > hi[$1]) hi[$1] = $2 }
    END {
        for (k in c) { split(k, p, SUBSEP); if (c[k] > best[p[1]]) { best[p[1]] = c[k]; mode[p[1]] = p[2] } }
        for (r in n) printf "%-38s %s most often (%d of %d positions), %s-%s\n", r, mode[r], best[r], n[r], lo[r], hi[r]
    }' | sort
