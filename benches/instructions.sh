#!/usr/bin/env bash
# Instructions and locked instructions per call, counted by callgrind: figures that
# do not drift with machine noise.
#
# For each scenario (closed success, open rejection, failure below the threshold,
# calls to a breaker ramping up, closed successes with what-if candidates)
# and each implementation in benches/common/mod.rs, runs examples/instructions.rs
# with CALLS calls and with 0 calls, collecting only inside its measured loop
# (--toggle-collect), and prints (Ir(CALLS) - Ir(0)) / CALLS. "locked" is
# callgrind's Ge ("global bus events"): instructions with a lock prefix, or an
# implicitly locked xchg, actually executed.
#
# Then, for cutout, splits the closed path into pieces (which function of the crate
# each instruction's source line belongs to; benches/callgrind_pieces.py), and lists
# the lock-prefixed instructions present in the machine code of the measured loop
# (objdump), taken or not.
#
# Usage: benches/instructions.sh [--no-pieces]       env: CALLS (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=${CALLS:-100000}
PIECES=1
[[ "${1:-}" == "--no-pieces" ]] && PIECES=0

if ! command -v valgrind >/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        apt-get install -y -qq valgrind >/dev/null
    else
        echo "valgrind is needed (apt-get install valgrind)" >&2
        exit 1
    fi
fi

# Line tables for the pieces below, without making every bench build carry them.
CARGO_PROFILE_BENCH_DEBUG=line-tables-only cargo build -q --profile bench --example instructions --features tower
BIN=target/release/examples/instructions
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# profile SCENARIO NAME CALLS OUT [THREADS]: one callgrind run (SHAPE from the
# environment: see examples/instructions.rs).
profile() {
    valgrind --tool=callgrind --collect-bus=yes --toggle-collect='*drive_*' \
        --compress-strings=no --compress-pos=no --demangle=no \
        --callgrind-out-file="$4" "$BIN" "$1" "$2" "$3" ${5:-} >/dev/null 2>"$4.log" || {
        cat "$4.log" >&2
        return 1
    }
}

# totals OUT: "Ir Ge" of a profile (callgrind leaves out trailing zero events).
totals() {
    awk '/^events:/ { n = NF - 1 } /^totals:/ { ir = $2; ge = (NF > 2 ? $3 : 0) }
         END { print ir + 0, ge + 0 }' "$1"
}

for scenario in closed open failing ramp candidates; do
    case $scenario in
        closed) title="closed success" ;;
        open) title="open rejection" ;;
        failing) title="failure below the threshold" ;;
        ramp) title="successful calls during a ramp-up, share frozen at 10/50/90%" ;;
        candidates) title="closed success with 0 to 3 what-if candidates" ;;
    esac
    echo
    echo "| $title ($CALLS calls) | instructions/call | locked/call |"
    echo "|---|---|---|"
    names=$("$BIN" list "$scenario")
    for name in $names; do
        profile "$scenario" "$name" 0 "$TMP/zero.out"
        profile "$scenario" "$name" "$CALLS" "$TMP/$scenario.$name.out"
        read -r ir0 ge0 < <(totals "$TMP/zero.out")
        read -r ir ge < <(totals "$TMP/$scenario.$name.out")
        awk -v n="$name" -v c="$CALLS" -v ir="$((ir - ir0))" -v ge="$((ge - ge0))" \
            'BEGIN { printf "| %s | %.1f | %.2f |\n", n, ir / c, ge / c }'
    done
done

# Threads sharing one breaker, run one at a time by valgrind: which locked
# instructions each call executes when more threads than owned stripes share it.
threads=${THREADS:-"2 4 8"}
echo
echo "| closed success, N threads on one breaker (instructions/call, locked/call) | $(for t in $threads; do printf '%s threads | ' "$t"; done)"
echo "|---|$(for t in $threads; do printf -- '---|'; done)"
names=$("$BIN" list contended)
for name in $names; do
    row="| $name |"
    for t in $threads; do
        profile closed "$name" 0 "$TMP/zero.out" "$t"
        profile closed "$name" "$CALLS" "$TMP/threads.out" "$t"
        read -r ir0 ge0 < <(totals "$TMP/zero.out")
        read -r ir ge < <(totals "$TMP/threads.out")
        row+=$(awk -v c="$((CALLS * t))" -v ir="$((ir - ir0))" -v ge="$((ge - ge0))" \
            'BEGIN { printf " %.1f, %.2f |", ir / c, ge / c }')
    done
    echo "$row"
done

# The call shapes and thread histories (SHAPE in examples/instructions.rs).
for shape in helper dyn crowd beside fresh; do
    case $shape in
        helper) scenario=closed; title="closed success, through one shared generic helper (not inlined)" ;;
        dyn) scenario=closed; title="closed success, through a \`&dyn Fn\`" ;;
        crowd) scenario=closed; title="closed success, a thread started while a crowd held every owned slot, after the crowd left" ;;
        beside) scenario=closed; title="closed success, a thread started while a crowd held every owned slot, beside it (a shared stripe)" ;;
        fresh) scenario=open; title="open rejection, from a thread whose first call is a rejection" ;;
    esac
    echo
    echo "| $title ($CALLS calls) | instructions/call | locked/call |"
    echo "|---|---|---|"
    names=$("$BIN" list "$scenario")
    for name in $names; do
        SHAPE=$shape profile "$scenario" "$name" 0 "$TMP/zero.out"
        SHAPE=$shape profile "$scenario" "$name" "$CALLS" "$TMP/shape.out"
        read -r ir0 ge0 < <(totals "$TMP/zero.out")
        read -r ir ge < <(totals "$TMP/shape.out")
        awk -v n="$name" -v c="$CALLS" -v ir="$((ir - ir0))" -v ge="$((ge - ge0))" \
            'BEGIN { printf "| %s | %.1f | %.2f |\n", n, ir / c, ge / c }'
    done
done

echo
echo "| closed, async and tower: cutout (default window); tower_resilience: tower-resilience 0.13's layer (its defaults) ($CALLS calls) | instructions/call | locked/call |"
echo "|---|---|---|"
names=$("$BIN" list tower)
for name in $names; do
    profile tower "$name" 0 "$TMP/zero.out"
    profile tower "$name" "$CALLS" "$TMP/tower.out"
    read -r ir0 ge0 < <(totals "$TMP/zero.out")
    read -r ir ge < <(totals "$TMP/tower.out")
    awk -v n="$name" -v c="$CALLS" -v ir="$((ir - ir0))" -v ge="$((ge - ge0))" \
        'BEGIN { printf "| %s | %.1f | %.2f |\n", n, ir / c, ge / c }'
done

[[ $PIECES == 1 ]] || exit 0

for name in cutout_consecutive cutout_window cutout_window_slow; do
    for scenario in closed open; do
        echo
        echo "#### $name, $scenario: where the instructions go"
        echo
        python3 benches/callgrind_pieces.py "$TMP/$scenario.$name.out" "$CALLS"
    done
done

echo
echo "#### The machine code of cutout's closed path"
echo
echo "Every function the measured loop executed, with the lock-prefixed instructions"
echo "its code holds (in branches the closed path may not take: the executed count is"
echo "the 'locked/call' column above)."
for name in cutout_consecutive cutout_window; do
    echo
    echo "$name:"
    echo
    python3 benches/callgrind_pieces.py "$TMP/closed.$name.out" "$CALLS" "$BIN" | sed -n '/^| function/,$p'
done
