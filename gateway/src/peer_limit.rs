//! Open connections per client address (HTTP and WebSocket alike), so that one address
//! cannot take every connection slot: past `--max-connections-per-ip` a new connection is
//! closed at once, before anything is read from it.

use std::collections::HashMap;
use std::net::IpAddr;

use parking_lot::Mutex;

/// Shards of the count map (the gateway threads rarely contend on one).
const SHARDS: usize = 16;

/// Open connections by client address.
pub struct PeerConnections {
    shards: Vec<Mutex<HashMap<IpAddr, u32>>>,
}

impl Default for PeerConnections {
    fn default() -> Self {
        PeerConnections {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

/// The address a connection counts under: an IPv4 client of a dual-stack listener is the
/// IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl PeerConnections {
    fn shard(&self, ip: &IpAddr) -> &Mutex<HashMap<IpAddr, u32>> {
        let index = match ip {
            IpAddr::V4(v4) => u32::from(*v4) as usize,
            IpAddr::V6(v6) => u128::from(*v6) as usize,
        };
        &self.shards[index % SHARDS]
    }

    /// Counts a new connection from `ip`, unless it already has `max` open (`0`: no cap).
    pub fn try_open(&self, ip: IpAddr, max: usize) -> bool {
        let ip = canonical(ip);
        let mut counts = self.shard(&ip).lock();
        let open = counts.entry(ip).or_insert(0);
        if max > 0 && *open as usize >= max {
            if *open == 0 {
                counts.remove(&ip);
            }
            return false;
        }
        *open += 1;
        true
    }

    /// A connection from `ip` closed.
    pub fn close(&self, ip: IpAddr) {
        let ip = canonical(ip);
        let mut counts = self.shard(&ip).lock();
        if let Some(open) = counts.get_mut(&ip) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                counts.remove(&ip);
            }
        }
    }

    /// Open connections from `ip`.
    pub fn open(&self, ip: IpAddr) -> u32 {
        let ip = canonical(ip);
        self.shard(&ip).lock().get(&ip).copied().unwrap_or(0)
    }

    /// Addresses with an open connection.
    pub fn addresses(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_at_most_its_cap_and_others_are_not_affected() {
        let peers = PeerConnections::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!((0..3).all(|_| peers.try_open(a, 3)));
        assert!(!peers.try_open(a, 3), "the fourth from one address");
        assert!(peers.try_open(b, 3), "another address");
        peers.close(a);
        assert!(peers.try_open(a, 3), "a slot given back");
        assert_eq!(peers.open(a), 3);
        for _ in 0..3 {
            peers.close(a);
        }
        peers.close(b);
        assert_eq!(peers.addresses(), 0, "nothing kept for closed addresses");
        assert!((0..1000).all(|_| peers.try_open(a, 0)), "0: no cap");
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_counts_as_its_ipv4_address() {
        let peers = PeerConnections::default();
        let v4: IpAddr = "192.0.2.9".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.9".parse().unwrap();
        assert!(peers.try_open(v4, 2));
        assert!(peers.try_open(mapped, 2));
        assert!(!peers.try_open(v4, 2));
        peers.close(mapped);
        assert_eq!(peers.open(v4), 1);
    }
}
