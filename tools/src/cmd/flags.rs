//! Parsers for flag values, so that a malformed value is bad usage (exit code 2, API.md §19)
//! caught while the command line is read, not a failure found later.

/// An etcd endpoint: `http://HOST:PORT` or `https://HOST:PORT`.
pub fn etcd_endpoint(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or_else(|| format!("{text:?}: expected http://HOST:PORT (an etcd v3 endpoint)"))?;
    host_port(rest.trim_end_matches('/'))?;
    Ok(text.trim_end_matches('/').to_string())
}

/// A cluster name: 1 to 64 letters, digits, `.`, `_` or `-` (a path segment of its etcd keys).
pub fn cluster_name(text: &str) -> Result<String, String> {
    let ok = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    ok.then(|| text.to_string())
        .ok_or_else(|| format!("{text:?}: 1 to 64 letters, digits, '.', '_' or '-'"))
}

/// A node id: 1 to 64 letters, digits, `.`, `_`, `:` or `-`.
pub fn node_id(text: &str) -> Result<String, String> {
    ladder_sequencer::replication::valid_node_id(text)
        .then(|| text.to_string())
        .ok_or_else(|| format!("{text:?}: 1 to 64 letters, digits, '.', '_', ':' or '-'"))
}

/// `--advertise-host`: a host name (letters, digits, `.`, `-`, at most 253 characters) or an
/// IP address (IPv6 without brackets).
pub fn advertise_host(text: &str) -> Result<String, String> {
    let name_ok = !text.is_empty()
        && text.len() <= 253
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    if name_ok || text.parse::<std::net::IpAddr>().is_ok() {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?}: expected a host name or an IP address, e.g. node-a.internal or 10.0.0.7"
        ))
    }
}

/// A `HOST:PORT` address: a non-empty host (name, IPv4, or `[IPv6]`) and a port number.
/// Only its form is checked here; a name that does not resolve is found when it is used.
pub fn host_port(text: &str) -> Result<String, String> {
    let expected = || format!("{text:?}: expected HOST:PORT, e.g. 127.0.0.1:8080");
    let (host, port) = text.rsplit_once(':').ok_or_else(expected)?;
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    };
    if !host_ok || port.parse::<u16>().is_err() {
        return Err(expected());
    }
    Ok(text.to_string())
}

/// Whether every address `HOST:PORT` resolves to is a loopback address (one that does not
/// resolve is not).
pub fn is_loopback(host_port: &str) -> bool {
    use std::net::ToSocketAddrs;
    match host_port.to_socket_addrs() {
        Ok(addresses) => {
            let addresses: Vec<_> = addresses.collect();
            !addresses.is_empty() && addresses.iter().all(|a| a.ip().is_loopback())
        }
        Err(_) => false,
    }
}

/// The replication secret held in a file (at least 16 bytes, whitespace around it trimmed).
pub fn secret_file(text: &str) -> Result<ladder_sequencer::replication::LinkSecret, String> {
    ladder_sequencer::replication::LinkSecret::from_file(std::path::Path::new(text))
}

/// An `http://HOST:PORT` URL (a trailing `/` allowed), for the load generator's `--url`.
pub fn http_url(text: &str) -> Result<String, String> {
    let authority = text
        .strip_prefix("http://")
        .map(|rest| rest.trim_end_matches('/'))
        .ok_or_else(|| format!("{text:?}: expected http://HOST:PORT (https is not supported)"))?;
    host_port(authority).map_err(|_| format!("{text:?}: expected http://HOST:PORT"))?;
    Ok(text.to_string())
}

/// A JSON-RPC endpoint's URL: `http://` or `https://` and a host (`--rpc-url`,
/// `--bundler-url`).
pub fn rpc_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or_else(|| format!("{text:?}: expected an http:// or https:// URL"))?;
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{text:?}: a URL has no spaces"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let (ip, after) = bracketed
                .split_once(']')
                .ok_or_else(|| format!("{text:?}: an IPv6 host needs its closing ]"))?;
            let port = match after {
                "" => None,
                _ => Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| format!("{text:?}: expected :PORT after the IPv6 host"))?,
                ),
            };
            (ip, port)
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err(format!("{text:?}: expected a host after the scheme"));
    }
    if let Some(port) = port {
        port.parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{text:?}: the port must be 1 to 65535"))?;
    }
    Ok(text.to_string())
}

/// A `0x` + 40 hex digit address (its EIP-55 checksum is not required).
pub fn address(text: &str) -> Result<String, String> {
    ladder_protocol::Address::parse_ignoring_checksum(text)
        .map_err(|e| format!("{text:?}: expected a 0x address of 40 hex digits ({e})"))?;
    Ok(text.to_string())
}

/// A `0x` + 64 hex digit condition id.
pub fn condition_id(text: &str) -> Result<ladder_protocol::B256, String> {
    text.parse()
        .map_err(|e| format!("{text:?}: expected a 0x condition id of 64 hex digits ({e})"))
}

/// `buy` or `sell`, in any case.
pub fn side(text: &str) -> Result<ladder_protocol::Side, String> {
    match text.to_ascii_lowercase().as_str() {
        "buy" => Ok(ladder_protocol::Side::Buy),
        "sell" => Ok(ladder_protocol::Side::Sell),
        _ => Err(format!("{text:?}: expected buy or sell")),
    }
}

/// `GTC`, `GTD`, `FOK` or `FAK`, in any case.
pub fn order_type(text: &str) -> Result<ladder_protocol::wire::OrderType, String> {
    text.to_ascii_uppercase()
        .parse()
        .map_err(|_| format!("{text:?}: expected GTC, GTD, FOK or FAK"))
}

/// A price such as `0.55`, in ticks of 0.0001.
pub fn price_ticks(text: &str) -> Result<u32, String> {
    ladder_protocol::parse_price_ticks(text).map_err(|e| format!("{text:?}: {e}"))
}

/// An EOA private key: `0x` + 64 hex digits.
pub fn private_key(text: &str) -> Result<String, String> {
    ladder_client::Wallet::from_hex(text)
        .map_err(|e| format!("expected 0x + 64 hex digits ({e})"))?;
    Ok(text.to_string())
}

/// `yes`, `no` (the demo market's tokens) or a decimal token id.
pub fn token(text: &str) -> Result<String, String> {
    let named = matches!(text.to_ascii_lowercase().as_str(), "yes" | "no");
    if !named {
        ladder_protocol::U256::from_dec_str(text)
            .map_err(|e| format!("{text:?}: expected yes, no or a decimal token id ({e})"))?;
    }
    Ok(text.to_string())
}

/// A record type as `ladder journal dump` names it: a command's name (`place_order`, ...)
/// or `unknown_<number>` for a record type this build cannot decode.
pub fn record_type(text: &str) -> Result<String, String> {
    // Only the form dump prints (`unknown_7`, not `unknown_07` or `unknown_+7`).
    let unknown_type = text
        .strip_prefix("unknown_")
        .and_then(|number| number.parse::<u16>().ok())
        .is_some_and(|record_type| super::journal::undecodable_type_name(record_type) == text);
    if unknown_type || ladder_engine::Command::TYPE_NAMES.contains(&text) {
        return Ok(text.to_string());
    }
    Err(format!(
        "{text:?}: expected a record type: {} (or unknown_<number>)",
        ladder_engine::Command::TYPE_NAMES.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_takes_names_and_addresses_with_a_port() {
        for good in [
            "127.0.0.1:8080",
            "localhost:0",
            "[::1]:9000",
            "node-2.local:65535",
        ] {
            assert_eq!(host_port(good).as_deref(), Ok(good));
        }
        for bad in [
            "bogus",
            ":8080",
            "host:",
            "host:65536",
            "host:http",
            "[::1:80",
            "a b:1",
        ] {
            assert!(host_port(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn record_types_are_the_names_dump_prints() {
        for good in ["place_order", "tick", "record_redemption", "unknown_7"] {
            assert_eq!(record_type(good).as_deref(), Ok(good));
        }
        for bad in [
            "nosuchtype",
            "PLACE_ORDER",
            "unknown_",
            "unknown_x",
            "unknown_07",
            "unknown_+7",
            "",
        ] {
            assert!(record_type(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn urls_addresses_and_order_fields_are_checked_when_read() {
        assert!(http_url("http://127.0.0.1:8080/").is_ok());
        for bad in [
            "foo",
            "https://127.0.0.1:8080",
            "http://",
            "http://host",
            "http://h:1/x",
        ] {
            assert!(http_url(bad).is_err(), "{bad} accepted");
        }
        assert!(address("0x000000000000000000000000000000000000C10b").is_ok());
        assert!(address("zz").is_err());
        assert!(condition_id(&format!("0x{}", "3b".repeat(32))).is_ok());
        assert!(condition_id("zz").is_err());
        assert_eq!(side("BUY"), Ok(ladder_protocol::Side::Buy));
        assert!(side("up").is_err());
        assert!(order_type("fak").is_ok());
        assert!(order_type("XYZ").is_err());
        assert_eq!(price_ticks("0.55"), Ok(5_500));
        assert!(token("YES").is_ok() && token("123").is_ok() && token("bogus").is_err());
        assert!(
            private_key(&format!("0x{}", "11".repeat(32))).is_ok() && private_key("zz").is_err()
        );
        assert!(price_ticks("abc").is_err());
    }
}
