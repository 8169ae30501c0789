//! Replication to hot standbys (LMAX style): the primary streams committed journal records
//! to each standby over TCP; a standby appends them to its own journal, applies them, and
//! acknowledges. With `--replicas N` a batch's answers leave only after N standbys hold it.
//!
//! Wire format: the standby's one-line handshake `LADDER-REPL 2 FROM <seq> AFTER <mark>\n`,
//! where `<mark>` identifies the last record it holds (`seq:timestamp_ns:type:crc`, see
//! [`RecordMark`]; `-` when it holds none). The primary answers `OK\n` and its 32-byte master
//! key, or `REFUSED <reason>\n` when the standby's last record is not the primary's (its
//! journal diverged). Then records as `len u32 | seq u64 | timestamp_ns u64 | type u16 |
//! payload`, big-endian; acknowledgements from the standby as lines `ACK <seq>\n`.

pub mod client;
mod hub;
mod mark;
pub mod server;

pub use hub::ReplicationHub;
pub use mark::{check_standby, RecordMark};

/// The handshake line's prefix.
pub const HANDSHAKE: &str = "LADDER-REPL 2 FROM ";
/// Between the first sequence wanted and the mark of the last one held.
pub const HANDSHAKE_AFTER: &str = " AFTER ";
/// The mark sent by a standby that holds no record.
pub const NO_MARK: &str = "-";
/// The primary's answer that it will stream.
pub const ACCEPTED: &str = "OK";
/// The primary's answer that it will not, followed by the reason.
pub const REFUSED: &str = "REFUSED ";
/// Largest record payload accepted from the wire.
pub const RECORD_PAYLOAD_MAX: usize = 1 << 20;

/// The standby's handshake line: it wants records from `from_seq` on, and `last` is the mark
/// of the record before (`None`: it holds none).
pub fn handshake_line(from_seq: u64, last: Option<&RecordMark>) -> String {
    let mark = last.map_or_else(|| NO_MARK.to_string(), RecordMark::to_string);
    format!("{HANDSHAKE}{from_seq}{HANDSHAKE_AFTER}{mark}\n")
}

/// Reads a handshake line: the first sequence wanted and the mark of the record before it.
pub fn parse_handshake(line: &str) -> Result<(u64, Option<RecordMark>), String> {
    let bad = || format!("bad handshake {line:?}");
    let rest = line.trim_end().strip_prefix(HANDSHAKE).ok_or_else(bad)?;
    let (from, mark) = rest.split_once(HANDSHAKE_AFTER).ok_or_else(bad)?;
    let from_seq: u64 = from.parse().map_err(|_| bad())?;
    if from_seq == 0 {
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
    Ok((from_seq, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_reads_back_and_its_mark_must_name_the_record_before() {
        let mark = RecordMark {
            seq: 41,
            timestamp_ns: 5,
            record_type: 1,
            payload_crc: 9,
        };
        let line = handshake_line(42, Some(&mark));
        assert_eq!(line, "LADDER-REPL 2 FROM 42 AFTER 41:5:1:00000009\n");
        assert_eq!(parse_handshake(&line), Ok((42, Some(mark))));
        assert_eq!(parse_handshake(&handshake_line(1, None)), Ok((1, None)));
        for bad in [
            handshake_line(43, Some(&mark)),
            handshake_line(2, None),
            handshake_line(0, None),
            "LADDER-REPL 1 FROM 42\n".to_string(),
            "LADDER-REPL 2 FROM 42 AFTER 41:5:1\n".to_string(),
        ] {
            assert!(parse_handshake(&bad).is_err(), "{bad:?}");
        }
    }
}
