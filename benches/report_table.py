#!/usr/bin/env python3
"""Prints the one markdown table of benches/report.sh from criterion's estimates.

Usage: report_table.py CRITERION_DIR [CONTENDED_RUN_DIR ...]

Single-threaded suites come from CRITERION_DIR/<suite>/<id>/new/estimates.json.
Contended figures come from each CONTENDED_RUN_DIR (a copy of one run's
CRITERION_DIR/contended): the median of the runs' medians, and their spread.
Ratios are implementation / cutout, measured in the same run of the same suite:
above 1 means cutout is faster.
"""
import json
import os
import statistics
import sys

SUITES = ["closed_success", "open_reject", "failure_path", "failure_path_one_in_10",
          "failure_path_one_in_3", "half_open"]
# Suites with their own baselines (benches/future.rs, benches/registry.rs), printed as
# a second table of medians under their full criterion ids (wall time).
EXTRA = ["future", "registry"]
ORDER = [
    "direct", "floor_load", "floor_load_fetch_add", "floor_striped", "cutout_consecutive",
    "cutout_window", "cutout_window_slow", "cutout_window_whole", "failsafe_consecutive",
    "failsafe_default", "failsafe_rate", "recloser_default", "mutex",
]


def median(path):
    with open(os.path.join(path, "new", "estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]


def ns(x):
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:,.0f}"


def ratio(x, ref):
    return f"{x / ref:.2f}x" if ref else "-"


def key(name):
    return ORDER.index(name) if name in ORDER else len(ORDER)


def main():
    root, runs = sys.argv[1], sys.argv[2:]
    print("| suite | implementation | median ns/call | / cutout_consecutive | / cutout_window |")
    print("|---|---|---|---|---|")
    for suite in SUITES:
        d = os.path.join(root, suite)
        if not os.path.isdir(d):
            continue
        rows = {n: median(os.path.join(d, n)) for n in os.listdir(d)
                if os.path.exists(os.path.join(d, n, "new", "estimates.json"))}
        if suite == "half_open":
            ref1, ref2 = rows.get("cycle_cutout"), None
            label = "half_open (cycle: 4 calls, 3 transitions)"
        else:
            ref1, ref2 = rows.get("cutout_consecutive"), rows.get("cutout_window")
            label = suite
        for name in sorted(rows, key=key):
            r1 = ratio(rows[name], ref1) if not name.startswith("reject_full") else "-"
            r2 = ratio(rows[name], ref2) if ref2 else "-"
            print(f"| {label} | {name} | {ns(rows[name])} | {r1} | {r2} |")
    contended(runs)
    extra(root)


def contended(runs):
    """Rows of the main table from the contended runs (none without runs)."""
    # contended: per-thread ns/call as measured; aggregate = per-thread / threads.
    per = {}
    for run in runs:
        for name in os.listdir(run):
            for t in os.listdir(os.path.join(run, name)):
                p = os.path.join(run, name, t)
                if t.isdigit() and os.path.exists(os.path.join(p, "new", "estimates.json")):
                    per.setdefault((name, int(t)), []).append(median(p))
    threads = sorted({t for _, t in per})
    names = sorted({n for n, _ in per}, key=key)
    agg = {k: statistics.median(v) / k[1] for k, v in per.items()}
    for t in threads:
        ref1, ref2 = agg.get(("cutout_consecutive", t)), agg.get(("cutout_window", t))
        for name in names:
            if (name, t) not in per:
                continue
            v = [x / t for x in per[(name, t)]]
            spread = f" ({ns(min(v))}-{ns(max(v))} over {len(v)} runs)" if len(v) > 1 else ""
            cell = f"{ns(agg[(name, t)])}{spread}; per thread {ns(agg[(name, t)] * t)}"
            print(f"| contended, {t} threads (aggregate) | {name} | {cell} | "
                  f"{ratio(agg[(name, t)], ref1)} | {ratio(agg[(name, t)], ref2)} |")


def extra(root):
    rows = []
    for suite in EXTRA:
        for dirpath, _, files in os.walk(os.path.join(root, suite)):
            if os.path.basename(dirpath) == "new" and "benchmark.json" in files:
                with open(os.path.join(dirpath, "benchmark.json")) as f:
                    name = json.load(f)["full_id"]
                rows.append((name, median(os.path.dirname(dirpath))))
    if not rows:
        return
    print()
    print("| async and registry (wall time) | median ns/call |")
    print("|---|---|")
    for name, m in sorted(rows):
        print(f"| {name} | {ns(m)} |")


if __name__ == "__main__":
    main()
