//! A failing call recorded below the trip threshold: what each implementation pays
//! to count a failure and evaluate its policy (cutout sums its window); then calls
//! of which one in 10, and one in 3, fail (`failure_path_one_in_N`).

#[allow(dead_code)]
mod common;

use common::{CpuTime, Group, Op};
use criterion::{Criterion, criterion_group, criterion_main};

fn failure_path(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("failure_path");
    common::failing(&mut Group {
        group: &mut group,
        op: Op::Fail,
    });
    group.finish();
    // A dependency in partial trouble: one call in `n` fails, below every trip
    // threshold, the others succeed (per call, both kinds together).
    for n in [10, 3] {
        let mut group = c.benchmark_group(format!("failure_path_one_in_{n}"));
        common::failing(&mut Group {
            group: &mut group,
            op: Op::FailOneIn(n),
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = CpuTime::criterion();
    targets = failure_path
}
criterion_main!(benches);
