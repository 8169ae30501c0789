//! The 405 answer (RFC 9110 15.5.6) and the methods each admin route answers; the other
//! routes' methods are in [`crate::routes`].

use super::Outcome;
use crate::http::{Response, Status};

/// The `Allow` value of an admin route (the path after `/admin`); `None` for no such route.
pub fn admin_allowed(rest: &str) -> Option<&'static str> {
    Some(match rest {
        "/state-hash" | "/leader" => "GET, HEAD",
        "/accounts" => "POST, DELETE",
        "/markets" | "/deposits" | "/withdrawals" | "/redemptions" | "/promote" | "/snapshot" => {
            "POST"
        }
        p if market_action_path(p).is_some() => "POST",
        _ => return None,
    })
}

/// The condition id and action of `/markets/{condition_id}/{action}` (after `/admin`), for
/// the actions of API.md §15; `None` for any other path. The id is checked later (400).
pub fn market_action_path(rest: &str) -> Option<(&str, &str)> {
    let (id, action) = rest.strip_prefix("/markets/")?.split_once('/')?;
    let known = matches!(action, "pause" | "resume" | "resolve" | "tick-size");
    (known && !id.is_empty()).then_some((id, action))
}

/// 405 naming the methods the route answers.
pub fn method_not_allowed(allow: &'static str) -> Outcome {
    Outcome::Respond(
        Response::error(Status::MethodNotAllowed, "method not allowed")
            .header("Allow", allow.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_admin_route_has_its_methods_and_others_have_none() {
        assert_eq!(admin_allowed("/accounts"), Some("POST, DELETE"));
        assert_eq!(admin_allowed("/markets/0xabc/pause"), Some("POST"));
        assert_eq!(admin_allowed("/nope"), None);
        assert_eq!(admin_allowed("/markets/0xabc/bogus"), None);
        assert_eq!(admin_allowed("/markets/0xabc"), None);
        assert_eq!(admin_allowed("/markets/0xabc/pause/x"), None);
        assert_eq!(
            market_action_path("/markets/0xabc/tick-size"),
            Some(("0xabc", "tick-size"))
        );
    }
}
