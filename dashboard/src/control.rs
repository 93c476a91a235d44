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

/// `POST api/control?name=N&action=force_open|disable|reset[&for_s=S]`.
///
/// Without a fleet that takes the controls, each acts on the local breakers
/// named `N`. With one, force open and disable are fleet-wide overrides for
/// `for_s` seconds ([`OVERRIDE_DEFAULT`] unless given, at most
/// [`OVERRIDE_MAX`]): the fleet sets every instance's breakers attached under
/// `N`, this one's included, and ends the override at its deadline. Reset
/// releases the fleet's override everywhere and resets the local breakers too,
/// whatever put them where they are.
pub(crate) async fn control(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if !same_origin(&headers) {
        return refuse(StatusCode::FORBIDDEN, "cross-origin request refused");
    }
    let (mut name, mut action, mut for_s) = (None, None, None);
    for pair in uri.query().unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("name", v)) => name = Some(view::decode(v)),
            Some(("action", v)) => action = Some(view::decode(v)),
            Some(("for_s", v)) => for_s = Some(view::decode(v)),
            _ => {}
        }
    }
    let (Some(name), Some(action)) = (name, action) else {
        return refuse(StatusCode::BAD_REQUEST, "name and action are required");
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
    let found = read_source(&shared, &name, |_| {}).await;
    match found {
        Err(panicked) => return panicked,
        Ok(0) => return refuse(StatusCode::NOT_FOUND, "no breaker by that name"),
        Ok(_) => {}
    }
    if let Some(fleet) = fleet {
        if let Err(why) = fleet.control(&name, fleet_action) {
            return refuse(StatusCode::BAD_REQUEST, why);
        }
        if fleet_action != FleetAction::Release {
            return StatusCode::NO_CONTENT.into_response();
        }
    }
    match read_source(&shared, &name, local).await {
        Err(panicked) => panicked,
        Ok(0) => refuse(StatusCode::NOT_FOUND, "no breaker by that name any more"),
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
    }
}

/// Reads the source for the breakers named `name`, calling `act` on each, and
/// counts them: off the async workers (a user's source may take its time), and
/// a source that panics is a 500 that says so.
async fn read_source(
    shared: &Arc<Shared>,
    name: &str,
    act: fn(&cutout::CircuitBreaker),
) -> Result<usize, Response> {
    let (shared, name) = (shared.clone(), name.to_owned());
    let read = tokio::task::spawn_blocking(move || {
        let mut found = 0usize;
        shared.source.for_each(&mut |n, breaker, _| {
            if n == name {
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
