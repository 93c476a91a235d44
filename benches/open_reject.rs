//! A call rejected by each implementation, tripped open with an hour's cooldown.

#[allow(dead_code)]
mod common;

use common::{CpuTime, Group, Op};
use criterion::{Criterion, criterion_group, criterion_main};

fn open_reject(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("open_reject");
    common::open(&mut Group {
        group: &mut group,
        op: Op::Rejected,
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = CpuTime::criterion();
    targets = open_reject
}
criterion_main!(benches);
