//! The replication handshakes under way: bounded in all and per client address, so that
//! peers without the secret cannot hold the listener. When the table is full, a newcomer
//! takes the place of the oldest handshake of the address that holds the most (if that is
//! more than the newcomer's address holds): a peer that opens silent connections from a few
//! addresses cannot keep a real standby, whose handshake finishes in a round trip, from
//! being heard. IPv6 addresses count by their /64, which one host usually holds whole.

use std::collections::VecDeque;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::Arc;

use parking_lot::Mutex;

/// Most handshakes under way at once (each has [`super::secure::HANDSHAKE_TIMEOUT`] to
/// finish).
pub const HANDSHAKES_MAX: usize = 32;
/// Most handshakes under way at once from one address (an IPv6 /64).
pub const HANDSHAKES_PER_IP_MAX: usize = 4;

/// The handshakes under way, oldest first.
#[derive(Default)]
pub(crate) struct Handshakes {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    /// (id, the address's group, a handle on the connection to end it early).
    under_way: VecDeque<(u64, IpAddr, TcpStream)>,
}

impl Table {
    fn held_by(&self, group: IpAddr) -> usize {
        self.under_way
            .iter()
            .filter(|(_, g, _)| *g == group)
            .count()
    }

    /// The oldest handshake of the group that holds the most (the oldest such group on a
    /// tie), if it holds more than `than`.
    fn evictable(&self, than: usize) -> Option<usize> {
        let (mut best, mut best_count) = (None, than);
        for (position, (_, group, _)) in self.under_way.iter().enumerate() {
            let count = self.held_by(*group);
            if count > best_count {
                best = Some(position);
                best_count = count;
            }
        }
        best
    }
}

/// One handshake under way; its place is given back when it is dropped.
pub(crate) struct PendingHandshake {
    handshakes: Arc<Handshakes>,
    id: u64,
}

impl Handshakes {
    /// A place for a handshake from `ip` on `stream` (a clone of it is kept, to end the
    /// handshake if a newcomer takes its place); `None` when `ip` holds its share already,
    /// or the table is full and no address holds more than `ip` does.
    pub(crate) fn begin(
        self: &Arc<Self>,
        ip: IpAddr,
        stream: &TcpStream,
    ) -> Option<PendingHandshake> {
        let group = group_of(ip);
        let mut table = self.table.lock();
        let mine = table.held_by(group);
        if mine >= HANDSHAKES_PER_IP_MAX {
            return None;
        }
        // Without a handle to end it early, a handshake could not give its place back.
        let handle = stream.try_clone().ok()?;
        if table.under_way.len() >= HANDSHAKES_MAX {
            let position = table.evictable(mine)?;
            if let Some((_, _, evicted)) = table.under_way.remove(position) {
                let _ = evicted.shutdown(Shutdown::Both);
            }
        }
        let id = table.next_id;
        table.next_id += 1;
        table.under_way.push_back((id, group, handle));
        Some(PendingHandshake {
            handshakes: self.clone(),
            id,
        })
    }

    /// Handshakes under way.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.lock().under_way.len()
    }
}

impl Drop for PendingHandshake {
    fn drop(&mut self) {
        let mut table = self.handshakes.table.lock();
        if let Some(position) = table.under_way.iter().position(|(id, _, _)| *id == self.id) {
            table.under_way.remove(position);
        }
    }
}

/// The address an IP counts as: itself for IPv4, its /64 for IPv6.
fn group_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};

    /// A connected socket (the handshake table keeps and may shut down a clone).
    fn socket(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn one_address_holds_at_most_its_share() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let handshakes = Arc::new(Handshakes::default());
        let mut held = Vec::new();
        for _ in 0..HANDSHAKES_PER_IP_MAX {
            let (client, server) = socket(&listener);
            held.push((client, handshakes.begin(v4(1), &server).expect("a place")));
        }
        let (_client, server) = socket(&listener);
        assert!(handshakes.begin(v4(1), &server).is_none());
        held.pop();
        assert!(
            handshakes.begin(v4(1), &server).is_some(),
            "a place came back"
        );
    }

    #[test]
    fn a_full_table_of_silent_peers_still_hears_a_newcomer_and_ends_the_oldest() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let handshakes = Arc::new(Handshakes::default());
        let mut silent = Vec::new();
        for i in 0..HANDSHAKES_MAX {
            let (client, server) = socket(&listener);
            let address = v4((i / HANDSHAKES_PER_IP_MAX) as u8);
            let place = handshakes.begin(address, &server).expect("a place");
            silent.push((client, server, place));
        }
        assert_eq!(handshakes.len(), HANDSHAKES_MAX);
        let (_standby, server) = socket(&listener);
        let standby = handshakes
            .begin(v4(200), &server)
            .expect("the newcomer is heard");
        assert_eq!(handshakes.len(), HANDSHAKES_MAX);
        // The oldest silent handshake was ended: its peer reads the end of the stream.
        let mut oldest = silent.remove(0).0;
        let mut byte = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut oldest, &mut byte).unwrap(), 0);
        // The silent peers come back from their addresses: they take each other's places,
        // not the newcomer's, which holds the least.
        for round in 0..3 * HANDSHAKES_MAX {
            let (client, server) = socket(&listener);
            let address = v4((round % (HANDSHAKES_MAX / HANDSHAKES_PER_IP_MAX)) as u8);
            if let Some(place) = handshakes.begin(address, &server) {
                silent.push((client, server, place));
            }
            if silent.len() > 2 * HANDSHAKES_MAX {
                silent.drain(..HANDSHAKES_MAX);
            }
        }
        let table = handshakes.table.lock();
        assert!(table.under_way.iter().any(|(id, _, _)| *id == standby.id));
    }

    #[test]
    fn ipv6_addresses_count_by_their_slash_64() {
        let a: Ipv6Addr = "2001:db8:1:2::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(group_of(IpAddr::V6(a)), group_of(IpAddr::V6(b)));
        assert_ne!(group_of(IpAddr::V6(a)), group_of(IpAddr::V6(c)));
        let mapped: Ipv6Addr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(group_of(IpAddr::V6(mapped)), v4(1));
    }
}
