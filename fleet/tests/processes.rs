//! Fleet instances as separate processes against a real `redis-server` on a free
//! loopback port: quorum opens, single trips that open nothing, joiners that start
//! Open, and a Redis that dies and comes back.

mod common;
mod node;

use common::{Node, Redis, namespace, redis_available};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// The nodes' settings here: an open of 30 s outlasts a loaded machine's pauses
/// between a trip and a joiner's start, and a joiner waits up to 5 s for the
/// picture.
const NODE: &[&str] = &["--open-ms", "30000", "--join-ms", "5000"];

fn trip(node: &mut Node) {
    let answer = node.ask("fail 3", 5 * SECOND);
    assert!(answer.starts_with("done open"), "{answer}");
}

#[test]
fn two_trips_open_the_third_and_a_joiner_starts_open() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start();
    let ns = namespace("quorum");
    let url = redis.url();
    let mut a = Node::spawn(&url, &ns, "a", NODE);
    let mut b = Node::spawn(&url, &ns, "b", NODE);
    let mut c = Node::spawn(&url, &ns, "c", NODE);
    for node in [&mut a, &mut b, &mut c] {
        assert!(node.ready.starts_with("ready closed"), "{}", node.ready);
        node.await_live(2, 5_000);
    }

    // With quorum 2, one instance's trip opens no other.
    trip(&mut a);
    assert_eq!(c.ask("wait-open 500", 5 * SECOND), "timeout closed");
    assert_eq!(b.state(), "closed");

    // A second trip makes a quorum: the third opens without sending a call.
    trip(&mut b);
    let answer = c.ask("wait-open 5000", 10 * SECOND);
    assert!(
        answer.starts_with("open "),
        "the third did not open within 5 s: {answer}"
    );
    // The counter follows the open (bounded wait: it is bumped just after).
    let counted = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        c.ask("stats", 5 * SECOND).contains("quorum_opens: 1")
    });
    assert!(counted, "{}", c.ask("stats", 5 * SECOND));
    // It opened with the fleet's deadline and rejects.
    assert_eq!(c.ask("call", 5 * SECOND), "rejected open");

    // A fourth instance, started during the outage, starts Open.
    let d = Node::spawn(&url, &ns, "d", NODE);
    assert_eq!(d.ready, "ready open true");
}

#[test]
fn redis_dies_local_decisions_go_on_and_the_view_recovers() {
    if !redis_available() {
        return;
    }
    let mut redis = Redis::start();
    let ns = namespace("outage");
    let url = redis.url();
    let mut a = Node::spawn(&url, &ns, "a", NODE);
    let mut b = Node::spawn(&url, &ns, "b", NODE);
    let mut c = Node::spawn(&url, &ns, "c", NODE);
    for node in [&mut a, &mut b, &mut c] {
        node.await_live(2, 5_000);
    }

    redis.kill();
    // Local decisions continue, and no call waits on Redis: the listener only
    // pushes onto the fleet's bounded queue (`force_push`), so the third failing
    // call trips the breaker and the answer comes within the bounded wait.
    assert_eq!(c.ask("fail 3", 5 * SECOND), "done open");
    assert_eq!(c.ask("call", 5 * SECOND), "rejected open");
    assert_eq!(a.ask("call", 5 * SECOND), "admitted closed");
    // The view ages out (live_after is 1 s in the nodes).
    assert_eq!(a.ask("live 0 3000", 10 * SECOND), "live 0");

    // Redis is back: the view recovers, and the fleet works again.
    redis.restart();
    for node in [&mut a, &mut b, &mut c] {
        node.await_live(2, 10_000);
    }
    trip(&mut a);
    trip(&mut b);
    let d = Node::spawn(&url, &ns, "d", NODE);
    assert_eq!(d.ready, "ready open true");
}

/// Not a test of its own: the fleet instance that the tests above start, in a
/// child process running this binary with `CUTOUT_FLEET_NODE` set (see
/// `common::Node`). Run without it, it does nothing.
#[test]
#[ignore = "an instance the other tests start in a child process"]
fn node() {
    if let Ok(args) = std::env::var(common::NODE_ARGS) {
        let args: Vec<String> = args.lines().map(str::to_owned).collect();
        node::run(&args);
    }
}
