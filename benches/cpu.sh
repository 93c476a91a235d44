#!/usr/bin/env bash
# Names this machine's CPU in one line, for the header of every table the bench
# scripts print: `lscpu`'s model name alone ("AMD EPYC") does not tell a Zen 3
# from a Zen 4, whose lean-path timings differ (docs/PERFORMANCE.md, one section
# per CPU), so the family, model and stepping follow it, and the CPU count.
#
# Usage: benches/cpu.sh      (or `source` it and call `cpu_line`)
cpu_line() {
    field() { lscpu | sed -n "s/^$1: *//p" | head -1; }
    printf '%s (family %s, model %s, stepping %s), %s CPUs, %s thread(s) per core\n' \
        "$(field 'Model name')" "$(field 'CPU family')" "$(field 'Model')" \
        "$(field 'Stepping')" "$(nproc)" "$(field 'Thread(s) per core')"
}
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then cpu_line; fi
