//! A trivial successful call through each implementation in the Closed state,
//! against the direct call and the atomic floors. One group, so one run compares
//! like with like.

#[allow(dead_code)]
mod common;

use common::{CpuTime, Group, Op};
use criterion::{Criterion, criterion_group, criterion_main};

fn closed_success(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("closed_success");
    common::closed(&mut Group {
        group: &mut group,
        op: Op::Succeed,
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = CpuTime::criterion();
    targets = closed_success
}
criterion_main!(benches);
