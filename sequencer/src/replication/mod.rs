//! Replication to hot standbys (LMAX style): the primary streams committed journal records
//! to each standby over TCP; a standby appends them to its own journal, applies them, and
//! acknowledges. With `--replicas N` a batch's answers leave only after N standbys hold it.
//!
//! Security ([`secure`]): the link is a Noise handshake keyed by the operators' shared secret
//! (`--replication-secret-file`), then every byte is encrypted and authenticated. A peer
//! without the secret gets nothing, not even an answer; the master key (from which API key
//! secrets derive, so that a standby verifies L2 requests and keeps every key when promoted)
//! travels only inside the encrypted link, to a peer that proved it holds the secret.
//!
//! Inside the link: the standby's hello, `LADDER-REPL 3 FROM <seq> AFTER <mark> NODE <id>`,
//! where `<mark>` identifies the last record it holds (`seq:timestamp_ns:type:crc`, see
//! [`RecordMark`]; `-` when it holds none) and `<id>` the standby (one session per id: a new
//! one replaces the old). The primary answers `OK`; the standby confirms with `READY\n`
//! under the session's keys (a replayed hello cannot), and the primary sends its 32-byte
//! master key; or it answers
//! `REFUSED <reason>` when the standby's last record is not the primary's (its journal
//! diverged). Then records as `len u32 | seq u64 | timestamp_ns u64 | type u16 | payload`,
//! big-endian; acknowledgements from the standby as lines `ACK <seq>\n`, never past the
//! last record sent (the primary ends a session that acknowledges what it was not sent).
//!
//! A standby whose next record the primary's journal no longer holds bootstraps first: see
//! [`bootstrap`].

pub mod bootstrap;
pub mod client;
mod handshakes;
mod hub;
mod mark;
pub mod patient;
pub mod secure;
pub mod server;

pub use hub::{HandshakePin, ReplicationHub};
pub use mark::{check_standby, RecordMark};
pub use secure::LinkSecret;

/// The handshake line's prefix.
pub const HANDSHAKE: &str = "LADDER-REPL 3 FROM ";
/// Between the first sequence wanted and the mark of the last one held.
pub const HANDSHAKE_AFTER: &str = " AFTER ";
/// Between the mark and the standby's node id.
pub const HANDSHAKE_NODE: &str = " NODE ";
/// The mark sent by a standby that holds no record.
pub const NO_MARK: &str = "-";
/// The primary's answer that it will stream.
pub const ACCEPTED: &str = "OK";
/// The primary's answer that it will not, followed by the reason.
pub const REFUSED: &str = "REFUSED ";
/// The standby's first bytes under the session's keys: it made this handshake (a replayed
/// first message cannot say it), so the primary may start the session.
pub const READY: &[u8; 6] = b"READY\n";
/// Largest record payload accepted from the wire.
pub const RECORD_PAYLOAD_MAX: usize = 1 << 20;
/// Longest node id.
pub const NODE_ID_BYTES_MAX: usize = 64;

/// What a standby asks for when it connects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The first sequence it wants.
    pub from_seq: u64,
    /// The mark of the record before it (`None`: it holds none).
    pub last: Option<RecordMark>,
    /// Who it is: one session per node id.
    pub node_id: String,
}

/// Whether `id` may name a node: 1 to [`NODE_ID_BYTES_MAX`] bytes of letters, digits and
/// `.`, `_`, `:`, `-`.
pub fn valid_node_id(id: &str) -> bool {
    (1..=NODE_ID_BYTES_MAX).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

impl Hello {
    /// The hello line.
    pub fn line(&self) -> String {
        let mark = self
            .last
            .map_or_else(|| NO_MARK.to_string(), |m| m.to_string());
        format!(
            "{HANDSHAKE}{}{HANDSHAKE_AFTER}{mark}{HANDSHAKE_NODE}{}\n",
            self.from_seq, self.node_id
        )
    }

    /// Reads a hello line.
    pub fn parse(line: &str) -> Result<Hello, String> {
        let bad = || format!("bad handshake {line:?}");
        let rest = line.trim_end().strip_prefix(HANDSHAKE).ok_or_else(bad)?;
        let (from, rest) = rest.split_once(HANDSHAKE_AFTER).ok_or_else(bad)?;
        let (mark, node_id) = rest.split_once(HANDSHAKE_NODE).ok_or_else(bad)?;
        let from_seq: u64 = from.parse().map_err(|_| bad())?;
        if from_seq == 0 || !valid_node_id(node_id) {
            return Err(bad());
        }
        let last = match mark {
            NO_MARK => None,
            text => Some(RecordMark::parse(text).ok_or_else(bad)?),
        };
        // A mark must name the record just before the first one wanted (none before the first).
        if last.map(|m| m.seq + 1) != (from_seq > 1).then_some(from_seq) {
            return Err(bad());
        }
        Ok(Hello {
            from_seq,
            last,
            node_id: node_id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_reads_back_and_its_mark_must_name_the_record_before() {
        let mark = RecordMark {
            seq: 41,
            timestamp_ns: 5,
            record_type: 1,
            payload_crc: 9,
        };
        let hello = |from_seq, last, node_id: &str| Hello {
            from_seq,
            last,
            node_id: node_id.to_string(),
        };
        let line = hello(42, Some(mark), "standby-1").line();
        assert_eq!(
            line,
            "LADDER-REPL 3 FROM 42 AFTER 41:5:1:00000009 NODE standby-1\n"
        );
        assert_eq!(Hello::parse(&line), Ok(hello(42, Some(mark), "standby-1")));
        let first = hello(1, None, "n");
        assert_eq!(Hello::parse(&first.line()), Ok(first));
        for bad in [
            hello(43, Some(mark), "n").line(),
            hello(2, None, "n").line(),
            hello(0, None, "n").line(),
            hello(1, None, "").line(),
            hello(1, None, "two words").line(),
            hello(1, None, &"x".repeat(NODE_ID_BYTES_MAX + 1)).line(),
            "LADDER-REPL 2 FROM 1 AFTER -\n".to_string(),
            "LADDER-REPL 3 FROM 42 AFTER 41:5:1 NODE n\n".to_string(),
        ] {
            assert!(Hello::parse(&bad).is_err(), "{bad:?}");
        }
    }
}
