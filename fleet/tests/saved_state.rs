//! A breaker made from the override state `Fleet::saved_state` handed out,
//! through `Builder::restore` or a registry's initial-state hook, and attached
//! (or inserted) after the override ended: the key's ends search for it, and
//! reset it, through the key's later overrides, for a minute past the
//! hand-out or the last end. Offline fleets: overrides act here at once.

mod common;

use common::{builder, issue, offline, wait_for};
use cutout::{Registry, State};
use cutout_fleet::{Fleet, OverrideMode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// A breaker of "db" built from what `saved_state` says now (an override in
/// force: its state), not attached.
fn restored(fleet: &Fleet) -> Arc<cutout::CircuitBreaker> {
    let saved = fleet.saved_state("db").expect("the override's state");
    Arc::new(builder().restore(saved).build().unwrap())
}

/// A registry key made as its override ends: the fleet's hook has said
/// ForcedOpen, and the end, before the registry inserts the breaker, finds no
/// key to reset. The end keeps looking: the breaker inserted forced open just
/// after is reset when the publisher next looks, not left forced open for good
/// (a forced-open breaker is never evicted). The registry's hook waits here
/// between the fleet's hook and the insert, to hold the window open.
#[test]
fn a_registry_key_made_as_its_override_ends_is_reset() {
    let fleet = offline();
    let hook = fleet.initial_state::<String>();
    let armed = Arc::new(AtomicBool::new(false));
    let (in_hook, in_hook_rx) = mpsc::channel::<()>();
    let (go, go_rx) = mpsc::channel::<()>();
    let (in_hook, go_rx) = (Mutex::new(in_hook), Mutex::new(go_rx));
    let armed_in_hook = armed.clone();
    let registry: Arc<Registry<String>> = Arc::new(
        Registry::builder(builder())
            .initial_state(move |key: &String| {
                let state = hook(key);
                if armed_in_hook.load(Ordering::SeqCst) {
                    in_hook.lock().unwrap().send(()).unwrap();
                    go_rx.lock().unwrap().recv().unwrap();
                }
                state
            })
            .build()
            .unwrap(),
    );
    fleet.attach_registry(&registry);
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    registry.remove("db");
    armed.store(true, Ordering::SeqCst);
    let maker = {
        let registry = registry.clone();
        std::thread::spawn(move || registry.get("db").state())
    };
    in_hook_rx.recv().unwrap();
    armed.store(false, Ordering::SeqCst);
    fleet.release("db").unwrap();
    go.send(()).unwrap();
    assert_eq!(
        maker.join().unwrap(),
        State::ForcedOpen,
        "made in the window"
    );
    // The publisher's next look, within 100 ms; generous for a loaded machine.
    wait_for("reset after the end", Duration::from_secs(5), || {
        registry.get("db").state() == State::Closed
    });
}

/// A breaker restored from `saved_state` under an override that ends before
/// the breaker is attached (the path `saved_state`'s docs give) is reset by
/// the attach: the end, which found no breaker, keeps looking for one.
#[test]
fn a_breaker_restored_from_saved_state_and_attached_after_the_end_is_reset() {
    let fleet = offline();
    for mode in [OverrideMode::ForceOpen, OverrideMode::Disable] {
        issue(&fleet, "db", mode, Duration::from_secs(60)).unwrap();
        let db = restored(&fleet);
        assert_ne!(db.state(), State::Closed, "{mode:?}");
        fleet.release("db").unwrap();
        fleet.attach("db", &db);
        assert_eq!(db.state(), State::Closed, "{mode:?}: reset on attach");
    }
}

/// An end that looks for its breaker leaves it to an override that holds the
/// key again: a breaker restored under the first override and attached under
/// the second is set as the second says, and reset at the second's end.
#[test]
fn an_end_looking_for_its_breaker_leaves_it_to_the_next_override() {
    let fleet = offline();
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    let db = restored(&fleet);
    fleet.release("db").unwrap();
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    fleet.attach("db", &db);
    assert_eq!(db.state(), State::ForcedOpen, "the second override's");
    fleet.release("db").unwrap();
    assert_eq!(db.state(), State::Closed, "its end");
}

/// The override is replaced by one of the other mode before the breaker made
/// from the first one's state is attached, and then ends: its end resets the
/// states handed out, not only its own mode's, so the attach resets the
/// breaker. Both ways round: ForcedOpen handed out and a Disable ending, and
/// Disabled handed out and a ForceOpen ending.
#[test]
fn a_restored_breaker_is_reset_after_its_override_is_replaced_by_the_other_mode() {
    let fleet = offline();
    let minute = Duration::from_secs(60);
    for (handed, then) in [
        (OverrideMode::ForceOpen, OverrideMode::Disable),
        (OverrideMode::Disable, OverrideMode::ForceOpen),
    ] {
        issue(&fleet, "db", handed, minute).unwrap();
        let db = restored(&fleet);
        let made = db.state();
        assert_ne!(made, State::Closed, "{handed:?}");
        issue(&fleet, "db", then, minute).unwrap();
        fleet.release("db").unwrap();
        assert_eq!(db.state(), made, "{handed:?}: not attached, not reached");
        fleet.attach("db", &db);
        assert_eq!(db.state(), State::Closed, "{handed:?}: reset on attach");
    }
}

/// A second override of the key starts and ends before the breaker made from
/// the first one's state is attached: the second pauses the search (it sets
/// only the attached breakers) and its end resumes it, so the attach resets
/// the breaker. Another breaker of the key, attached under the second
/// override and reset by its end, does not end the search.
#[test]
fn a_restored_breaker_is_reset_after_another_override_comes_and_goes() {
    let fleet = offline();
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    let db = restored(&fleet);
    fleet.release("db").unwrap();
    fleet.force_open("db", Duration::from_secs(60)).unwrap();
    let other = fleet.breaker("db", builder()).unwrap();
    assert_eq!(
        other.state(),
        State::ForcedOpen,
        "attached under the second"
    );
    fleet.release("db").unwrap();
    assert_eq!(other.state(), State::Closed, "the second's end");
    assert_eq!(db.state(), State::ForcedOpen, "not attached, not reached");
    fleet.attach("db", &db);
    assert_eq!(db.state(), State::Closed, "reset on attach");
}
