//! Every path Ladder serves outside `/admin`, once: the methods each answers (the `Allow`
//! header of a 405, RFC 9110 15.5.6, and what tells a 405 from a 404) and the bounded label
//! `/metrics` counts it under. The handlers in `app/` dispatch on the same paths.

/// A route: its path and the methods it answers (`HEAD` wherever `GET` is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The path, or for a route with a parameter its label (`/markets/{condition_id}`).
    pub path: &'static str,
    /// The `Allow` value.
    pub allow: &'static str,
}

const GET: &str = "GET, HEAD";

/// The routes with a fixed path.
pub const ROUTES: &[Route] = &[
    Route {
        path: "/time",
        allow: GET,
    },
    Route {
        path: "/markets",
        allow: GET,
    },
    Route {
        path: "/sampling-markets",
        allow: GET,
    },
    Route {
        path: "/book",
        allow: GET,
    },
    Route {
        path: "/books",
        allow: "GET, HEAD, POST",
    },
    Route {
        path: "/price",
        allow: GET,
    },
    Route {
        path: "/midpoint",
        allow: GET,
    },
    Route {
        path: "/spread",
        allow: GET,
    },
    Route {
        path: "/tick-size",
        allow: GET,
    },
    Route {
        path: "/neg-risk",
        allow: GET,
    },
    Route {
        path: "/fee-rate",
        allow: GET,
    },
    Route {
        path: "/prices-history",
        allow: GET,
    },
    Route {
        path: "/last-trades-prices",
        allow: "GET, HEAD, POST",
    },
    Route {
        path: "/claimable",
        allow: GET,
    },
    Route {
        path: "/auth/api-key",
        allow: "POST, DELETE",
    },
    Route {
        path: "/auth/derive-api-key",
        allow: GET,
    },
    Route {
        path: "/auth/api-keys",
        allow: GET,
    },
    Route {
        path: "/order",
        allow: "POST, DELETE",
    },
    Route {
        path: "/orders",
        allow: "GET, HEAD, POST, DELETE",
    },
    Route {
        path: "/heartbeats",
        allow: "POST, DELETE",
    },
    Route {
        path: "/bundler",
        allow: "POST",
    },
    Route {
        path: "/cancel-market-orders",
        allow: "DELETE",
    },
    Route {
        path: "/cancel-all",
        allow: "DELETE",
    },
    Route {
        path: "/trades",
        allow: GET,
    },
    Route {
        path: "/data/trades",
        allow: GET,
    },
    Route {
        path: "/balance-allowance",
        allow: GET,
    },
    Route {
        path: "/metrics",
        allow: GET,
    },
    Route {
        path: "/ws/user",
        allow: GET,
    },
    Route {
        path: "/ws/market",
        allow: GET,
    },
];

/// The routes with a parameter: the prefix their paths start with, and the route.
pub const PREFIXED_ROUTES: &[(&str, Route)] = &[
    (
        "/markets/",
        Route {
            path: "/markets/{condition_id}",
            allow: GET,
        },
    ),
    (
        "/trades/",
        Route {
            path: "/trades/{id}",
            allow: GET,
        },
    ),
];

/// The route `path` belongs to (a trailing `/` ignored); `None` for no route (and for
/// `/admin`, which has its own table in `app/allow.rs`).
pub fn route_of(path: &str) -> Option<Route> {
    let path = path.trim_end_matches('/');
    if let Some(route) = ROUTES.iter().find(|r| r.path == path) {
        return Some(*route);
    }
    PREFIXED_ROUTES
        .iter()
        .find(|(prefix, _)| path.starts_with(prefix))
        .map(|(_, route)| *route)
}

/// The `/metrics` label of a request path: its route, `/admin`, or `other`.
pub fn label(path: &str) -> &'static str {
    match route_of(path) {
        Some(route) => route.path,
        None if path.starts_with("/admin") => "/admin",
        None => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_finds_its_route_label_and_methods() {
        assert_eq!(
            route_of("/orders").map(|r| r.allow),
            Some("GET, HEAD, POST, DELETE")
        );
        assert_eq!(route_of("/orders/").map(|r| r.path), Some("/orders"));
        assert_eq!(
            route_of("/markets/0xabc").map(|r| r.path),
            Some("/markets/{condition_id}")
        );
        assert_eq!(route_of("/nope"), None);
        assert_eq!(label("/trades/0x01"), "/trades/{id}");
        assert_eq!(label("/admin/state-hash"), "/admin");
        assert_eq!(label("/nope"), "other");
    }

    #[test]
    fn every_route_is_listed_once() {
        let mut paths: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
        paths.sort_unstable();
        let listed = paths.len();
        paths.dedup();
        assert_eq!(paths.len(), listed);
    }
}
