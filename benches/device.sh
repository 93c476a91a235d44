#!/usr/bin/env bash
# The run on a borrowed many-core machine that has no Rust toolchain (the device
# machine of this workplace: 16 cores): benchmark binaries built here by
# `benches/device.sh build` into .devbench/ (git-ignored), carried there and run
# by `benches/device.sh run OUT`, which writes each suite's criterion output and
# the machine's description into OUT. Short measurement times: the whole run
# takes about six minutes on 16 cores.
#
# Suites: contended at 1, 2, 4, 8 and 16 threads (twice), closed_success and
# open_reject (single-threaded, every peer), shapes (the call shapes,
# the crowd and the tower layer), and examples/paired (the shapes in pairs).
# With LAYOUT_ONLY=1: benches/layout.sh's sweep and a second look at the shapes;
# with TOWER_ONLY=1: the tower shapes alone (paired and criterion);
# with ADDRS_ONLY=1: the layout sweep with every address printed (to tell a
# layout's effect from the machine's; docs/PERFORMANCE.md, "How it is measured").
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
build)
    rm -rf .devbench && mkdir -p .devbench
    for bench in contended closed_success open_reject shapes; do
        exe=$(cargo bench --no-run --features tower --bench "$bench" --message-format=json 2>/dev/null |
            python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["bench"]:
        print(m["executable"])')
        cp "$exe" ".devbench/$bench"
    done
    cargo build -q --release --example paired --features tower
    cargo build -q --release --example layout
    cp target/release/examples/paired target/release/examples/layout .devbench/
    strip .devbench/*
    ls -l .devbench
    ;;
run)
    out=${2:?usage: benches/device.sh run OUT}
    source benches/cpu.sh
    { cpu_line; uname -sr; lscpu; } >"$out/machine.txt" 2>&1
    b=(--bench --warm-up-time 0.3 --measurement-time 1 --noplot)
    if [[ -n ${ADDRS_ONLY:-} ]]; then
        # The third run: the inline call at 64 heap and 64 stack positions, twice
        # each, with where everything landed (examples/layout.rs, LAYOUT_ADDRS).
        n="setarch $(uname -m) -R"
        for p in $(seq 0 64 4032); do for _ in 1 2; do
            t=$(LAYOUT_ADDRS=1 HEAP_PAD=$p $n .devbench/layout inline 6000000 2>/tmp/a)
            echo "heap $p $t $(cat /tmp/a)"
        done; done >>"$out/addrs.log"
        for p in $(seq 0 64 4032); do for _ in 1 2; do
            t=$(env -i PATH="$PATH" LAYOUT_ADDRS=1 PAD="$(head -c "$p" /dev/zero | tr '\0' x)" \
                $n .devbench/layout inline 6000000 2>/tmp/a)
            echo "stack $p $t $(cat /tmp/a)"
        done; done >>"$out/addrs.log"
        exit 0
    fi
    if [[ -n ${TOWER_ONLY:-} ]]; then
        # The tower shapes, each polling a future type of its own, so that each
        # future's poll is inlined as in an application.
        timeout 60 .devbench/paired 400 20000 async >"$out/paired_async.log" 2>&1 ||
            echo "paired async: rc $?" >>"$out/machine.txt"
        timeout 150 .devbench/shapes "${b[@]}" 'tower/' \
            >"$out/shapes_tower.log" 2>&1 || echo "shapes: rc $?" >>"$out/machine.txt"
        exit 0
    fi
    if [[ -n ${LAYOUT_ONLY:-} ]]; then
        # The second run: the layout sweep (benches/layout.sh, shorter), and the
        # shapes the first run's time limit cut or that want a second look.
        BIN=.devbench/layout CALLS=6000000 REPS=2 timeout 200 bash benches/layout.sh -v \
            >"$out/layout.log" 2>&1 || echo "layout: rc $?" >>"$out/machine.txt"
        timeout 150 .devbench/shapes "${b[@]}" 'closed/(inline|helper|dyn)|tower/' \
            >"$out/shapes.log" 2>&1 || echo "shapes: rc $?" >>"$out/machine.txt"
        exit 0
    fi
    for i in 1 2; do
        CUTOUT_BENCH_THREADS=1,2,4,8,16 timeout 150 .devbench/contended "${b[@]}" \
            >"$out/contended.$i.log" 2>&1 || echo "contended $i: rc $?" >>"$out/machine.txt"
    done
    for bench in closed_success open_reject shapes; do
        timeout 150 ".devbench/$bench" "${b[@]}" >"$out/$bench.log" 2>&1 ||
            echo "$bench: rc $?" >>"$out/machine.txt"
    done
    timeout 60 .devbench/paired 200 >"$out/paired.log" 2>&1 || echo "paired: rc $?" >>"$out/machine.txt"
    ;;
*)
    echo "usage: benches/device.sh build | run OUT" >&2
    exit 2
    ;;
esac
