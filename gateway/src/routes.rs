//! Every path Ladder serves outside `/admin`, once: which handler module serves it (the
//! application dispatches from here), the methods it answers (the `Allow` header of a 405,
//! RFC 9110 15.5.6, and what tells a 405 from a 404) and the bounded label `/metrics` counts
//! it under.

/// The handler module that serves a route (each matches the methods it answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// Market data (`app/public.rs`).
    Public,
    /// API keys (`app/credentials.rs`).
    Credentials,
    /// Orders, cancels and balances (`app/orders.rs`).
    Orders,
    /// The dead-man switch (`app/heartbeats.rs`).
    Heartbeats,
    /// The ERC-4337 bundler (`app/bundler.rs`).
    Bundler,
    /// Trades (`app/trades.rs`).
    Trades,
    /// The Prometheus exposition.
    Metrics,
    /// A WebSocket endpoint: the server takes its upgrade before the application.
    WebSocket,
}

/// A route: its path, who serves it and the methods it answers (`HEAD` wherever `GET` is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The path, or for a route with a parameter its label (`/markets/{condition_id}`).
    pub path: &'static str,
    /// The handler module.
    pub serves: Serves,
    /// The `Allow` value.
    pub allow: &'static str,
}

const GET: &str = "GET, HEAD";

/// The routes with a fixed path.
pub const ROUTES: &[Route] = &[
    Route {
        path: "/time",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/markets",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/sampling-markets",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/book",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/books",
        serves: Serves::Public,
        allow: "GET, HEAD, POST",
    },
    Route {
        path: "/price",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/midpoint",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/spread",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/tick-size",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/neg-risk",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/fee-rate",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/prices-history",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/last-trades-prices",
        serves: Serves::Public,
        allow: "GET, HEAD, POST",
    },
    Route {
        path: "/claimable",
        serves: Serves::Public,
        allow: GET,
    },
    Route {
        path: "/auth/api-key",
        serves: Serves::Credentials,
        allow: "POST, DELETE",
    },
    Route {
        path: "/auth/derive-api-key",
        serves: Serves::Credentials,
        allow: GET,
    },
    Route {
        path: "/auth/api-keys",
        serves: Serves::Credentials,
        allow: GET,
    },
    Route {
        path: "/order",
        serves: Serves::Orders,
        allow: "POST, DELETE",
    },
    Route {
        path: "/orders",
        serves: Serves::Orders,
        allow: "GET, HEAD, POST, DELETE",
    },
    Route {
        path: "/heartbeats",
        serves: Serves::Heartbeats,
        allow: "POST, DELETE",
    },
    Route {
        path: "/bundler",
        serves: Serves::Bundler,
        allow: "POST",
    },
    Route {
        path: "/cancel-market-orders",
        serves: Serves::Orders,
        allow: "DELETE",
    },
    Route {
        path: "/cancel-all",
        serves: Serves::Orders,
        allow: "DELETE",
    },
    Route {
        path: "/trades",
        serves: Serves::Trades,
        allow: GET,
    },
    Route {
        path: "/data/trades",
        serves: Serves::Trades,
        allow: GET,
    },
    Route {
        path: "/balance-allowance",
        serves: Serves::Orders,
        allow: GET,
    },
    Route {
        path: "/metrics",
        serves: Serves::Metrics,
        allow: GET,
    },
    Route {
        path: "/ws/user",
        serves: Serves::WebSocket,
        allow: GET,
    },
    Route {
        path: "/ws/market",
        serves: Serves::WebSocket,
        allow: GET,
    },
];

/// The routes with a parameter: the prefix their paths start with, and the route.
pub const PREFIXED_ROUTES: &[(&str, Route)] = &[
    (
        "/markets/",
        Route {
            path: "/markets/{condition_id}",
            serves: Serves::Public,
            allow: GET,
        },
    ),
    (
        "/trades/",
        Route {
            path: "/trades/{id}",
            serves: Serves::Trades,
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
    // The parameter is one path segment: `/markets/{id}/x` is no route.
    PREFIXED_ROUTES
        .iter()
        .find(|(prefix, _)| {
            path.strip_prefix(prefix)
                .is_some_and(|parameter| !parameter.is_empty() && !parameter.contains('/'))
        })
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
    fn a_parameter_is_one_path_segment() {
        let id = format!("/markets/0x{}", "ab".repeat(32));
        assert_eq!(
            route_of(&id).map(|r| r.path),
            Some("/markets/{condition_id}")
        );
        assert_eq!(
            route_of(&format!("{id}/")).map(|r| r.path),
            Some("/markets/{condition_id}")
        );
        assert_eq!(route_of(&format!("{id}/x")), None);
        assert_eq!(route_of("/trades/1/2"), None);
    }

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
