//! A failing call recorded below the trip threshold: what each implementation pays
//! to count a failure and evaluate its policy (cutout sums its window).

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
}

criterion_group! {
    name = benches;
    config = CpuTime::criterion();
    targets = failure_path
}
criterion_main!(benches);
