//! The addresses a node gives others: its URL (in `GET /admin/leader`, in etcd and in a
//! standby's 503) and its replication address (in etcd, where standbys find the leader). A
//! bound address whose IP is unspecified (`0.0.0.0`, `::`) listens everywhere but cannot be
//! dialled from another host, so `--advertise-host`, or else this machine's host name,
//! stands in for that IP.

use std::net::SocketAddr;

/// `bound` as others reach it: its own IP when it names one, else `host` (or the machine's
/// host name), with its port.
pub fn advertised(bound: SocketAddr, host: Option<&str>) -> String {
    if !bound.ip().is_unspecified() {
        return bound.to_string();
    }
    match host.map(str::to_string).or_else(host_name) {
        // An IPv6 literal is bracketed before its port, as in a URL.
        Some(host) if host.contains(':') && !host.starts_with('[') => {
            format!("[{host}]:{}", bound.port())
        }
        Some(host) => format!("{host}:{}", bound.port()),
        None => bound.to_string(),
    }
}

/// This machine's host name, if it has one.
fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let status = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if status != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = std::str::from_utf8(&buf[..end]).ok()?.trim();
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_ip_is_kept_and_an_unspecified_one_replaced() {
        let named: SocketAddr = "10.1.2.3:8080".parse().unwrap();
        assert_eq!(advertised(named, Some("ignored")), "10.1.2.3:8080");
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(
            advertised(any, Some("node-a.internal")),
            "node-a.internal:8080"
        );
        assert_eq!(advertised(any, Some("fd00::1")), "[fd00::1]:8080");
        let any6: SocketAddr = "[::]:9000".parse().unwrap();
        assert_eq!(advertised(any6, Some("10.0.0.7")), "10.0.0.7:9000");
        // Without a host given, the machine's name (when it has one) stands in.
        let want = host_name().map_or("0.0.0.0:8080".to_string(), |h| format!("{h}:8080"));
        assert_eq!(advertised(any, None), want);
    }
}
