//! The controls: `POST api/control`, same-origin only, on the local breakers
//! or, where the source's fleet takes them, fleet-wide.

use crate::fleet::{FleetAction, OVERRIDE_DEFAULT, OVERRIDE_MAX};
use crate::sampler::Shared;
use crate::view;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;

/// A request from a page of this same origin: the browser says so
/// (`Sec-Fetch-Site: same-origin`), or its `Origin` names the `Host` it was sent to.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let (Some(origin), Some(host)) = (headers.get(header::ORIGIN), headers.get(header::HOST))
    else {
        return false;
    };
    let (Ok(origin), Ok(host)) = (origin.to_str(), host.to_str()) else {
        return false;
    };
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
}

fn refuse(status: StatusCode, why: impl Into<String>) -> Response {
    let mut why = why.into();
    why.push('\n');
    (status, why).into_response()
}

/// The breakers a control acts on: every local breaker named `name`, or with
/// an `address`, the one breaker of that name at that address.
struct Target {
    name: String,
    address: Option<usize>,
}

impl Target {
    fn takes(&self, name: &str, breaker: &cutout::CircuitBreaker) -> bool {
        name == self.name
            && (self.address).is_none_or(|a| a == std::ptr::from_ref(breaker) as usize)
    }

    /// The answer when the source holds none of them.
    fn not_found(&self) -> &'static str {
        match self.address {
            None => "no breaker by that name",
            Some(_) => "no breaker by that id",
        }
    }
}

/// `POST api/control?name=N&id=I&action=force_open|disable|reset[&for_s=S]`,
/// with `name`, `id` or both.
///
/// `id` is the one the snapshot gives the breaker's row: the control acts on
/// that breaker alone (found by the name and address it had in the latest
/// frame), where breakers that share a name have a card and an id each; the
/// page sends it. Without `id`, it acts on every local breaker named `N`.
///
/// Without a fleet that takes the controls, each acts on those local
/// breakers. With one, force open and disable are fleet-wide overrides for
/// `for_s` seconds ([`OVERRIDE_DEFAULT`] unless given, at most
/// [`OVERRIDE_MAX`]) of the name, whatever the `id`: the fleet sets every
/// instance's breakers attached under `N`, this one's included, and ends the
/// override at its deadline. Reset releases the fleet's override everywhere
/// and resets the local breakers too (the one `id` names, or every one named
/// `N`), whatever put them where they are.
pub(crate) async fn control(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if !same_origin(&headers) {
        return refuse(StatusCode::FORBIDDEN, "cross-origin request refused");
    }
    let (mut name, mut id, mut action, mut for_s) = (None, None, None, None);
    for pair in uri.query().unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("name", v)) => name = Some(view::decode(v)),
            Some(("id", v)) => id = Some(view::decode(v)),
            Some(("action", v)) => action = Some(view::decode(v)),
            Some(("for_s", v)) => for_s = Some(view::decode(v)),
            _ => {}
        }
    }
    let Some(action) = action.filter(|_| name.is_some() || id.is_some()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "name or id, and action, are required",
        );
    };
    let target = match id {
        None => Target {
            name: name.unwrap_or_default(),
            address: None,
        },
        Some(id) => match find(&shared, &id).await {
            Err(refused) => return refused,
            Ok(target) if name.as_ref().is_some_and(|n| *n != target.name) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "name and id name different breakers",
                );
            }
            Ok(target) => target,
        },
    };
    let fleet = shared.source.fleet.as_ref().filter(|f| f.controls());
    let duration = match (for_s, fleet) {
        (None, _) => OVERRIDE_DEFAULT,
        (Some(_), None) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "for_s: only with a fleet that takes the controls",
            );
        }
        (Some(s), Some(_)) => match s.parse::<u64>().map(Duration::from_secs) {
            Ok(d) if !d.is_zero() && d <= OVERRIDE_MAX => d,
            _ => {
                let why = format!("for_s: 1 to {} seconds", OVERRIDE_MAX.as_secs());
                return refuse(StatusCode::BAD_REQUEST, why);
            }
        },
    };
    let (local, fleet_action): (fn(&cutout::CircuitBreaker), FleetAction) = match action.as_str() {
        "force_open" => (|b| b.force_open(), FleetAction::ForceOpen(duration)),
        "disable" => (|b| b.disable(), FleetAction::Disable(duration)),
        "reset" => (|b| b.reset(), FleetAction::Release),
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "action: force_open, disable or reset",
            );
        }
    };
    let target = Arc::new(target);
    let found = read_source(&shared, &target, |_| {}).await;
    match found {
        Err(panicked) => return panicked,
        Ok(0) => return refuse(StatusCode::NOT_FOUND, target.not_found()),
        Ok(_) => {}
    }
    if let Some(fleet) = fleet {
        if let Err(why) = fleet.control(&target.name, fleet_action) {
            return refuse(StatusCode::BAD_REQUEST, why);
        }
        if fleet_action != FleetAction::Release {
            return StatusCode::NO_CONTENT.into_response();
        }
    }
    match read_source(&shared, &target, local).await {
        Err(panicked) => panicked,
        Ok(0) => refuse(
            StatusCode::NOT_FOUND,
            format!("{} any more", target.not_found()),
        ),
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
    }
}

/// The breaker that `id` names in the latest frame: its rows are every
/// breaker the sampler read, each with its track's id, name and address (a
/// scan, as a control is rare and a frame holds at most the source's breakers).
async fn find(shared: &Arc<Shared>, id: &str) -> Result<Target, Response> {
    let Ok(id) = id.parse::<u64>() else {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "id: a breaker's id, as the snapshot gives it",
        ));
    };
    // A script may come before the first page: the first frame is taken then.
    shared.started().await;
    let frame = shared.frames.borrow().clone();
    let row = frame.rows.iter().find(|row| row.id == id);
    row.map(|row| Target {
        name: row.name.to_string(),
        address: Some(row.address),
    })
    .ok_or_else(|| refuse(StatusCode::NOT_FOUND, "no breaker by that id"))
}

/// Reads the source for the breakers `target` names, calling `act` on each,
/// and counts them: off the async workers (a user's source may take its
/// time), and a source that panics is a 500 that says so.
async fn read_source(
    shared: &Arc<Shared>,
    target: &Arc<Target>,
    act: fn(&cutout::CircuitBreaker),
) -> Result<usize, Response> {
    let (shared, target) = (shared.clone(), target.clone());
    let read = tokio::task::spawn_blocking(move || {
        let mut found = 0usize;
        shared.source.for_each(&mut |name, breaker, _| {
            if target.takes(name, breaker) {
                found += 1;
                act(breaker);
            }
        });
        found
    });
    read.await.map_err(|_| {
        let why = "the breakers' source panicked (see the application's log)";
        refuse(StatusCode::INTERNAL_SERVER_ERROR, why)
    })
}
