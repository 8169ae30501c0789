//! Parsers for flag values, so that a malformed value is bad usage (exit code 2, CONTRACT 17)
//! caught while the command line is read, not a failure found later.

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

#[cfg(test)]
mod tests {
    use super::host_port;

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
}
