//! A journal that starts after a snapshot: a standby that took its state from the primary's
//! snapshot at `seq` holds no record up to it, so its journal begins with an empty segment
//! whose first record will be `seq + 1`. Readers, recovery and the tools treat it as a
//! trimmed journal.

use std::path::Path;

use crate::error::{JournalError, Result};
use crate::options::JournalOptions;
use crate::segment::{create_dir_durably, create_segment, journal_dir, list_segments};

/// Creates the journal of `data_dir` with one empty segment whose first record will be
/// `after_seq + 1`. The journal must hold no segment yet.
pub fn start_journal_after(
    data_dir: impl AsRef<Path>,
    after_seq: u64,
    options: JournalOptions,
) -> Result<()> {
    options.validate()?;
    let dir = journal_dir(data_dir.as_ref());
    create_dir_durably(&dir)?;
    if !list_segments(&dir)?.is_empty() {
        return Err(JournalError::InvalidOptions(format!(
            "{}: the journal already holds segments; it can only start later when empty",
            dir.display()
        )));
    }
    let first_seq = after_seq.checked_add(1).ok_or_else(|| {
        JournalError::InvalidOptions(format!("no journal can start after sequence {after_seq}"))
    })?;
    create_segment(&dir, first_seq, options.segment_size_bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Journal, JournalReader};

    fn options() -> JournalOptions {
        JournalOptions {
            segment_size_bytes: crate::layout::SEGMENT_SIZE_MIN_BYTES,
        }
    }

    #[test]
    fn a_journal_started_after_a_snapshot_takes_the_next_record_and_reads_from_it() {
        let dir = tempfile::tempdir().unwrap();
        start_journal_after(dir.path(), 41, options()).unwrap();
        let (mut journal, report) = Journal::open(dir.path(), options()).unwrap();
        assert!(report.torn_tail.is_none());
        assert_eq!((journal.last_seq(), journal.next_seq()), (41, 42));
        assert!(journal.append(1, 0, 1, b"too early").is_err());
        journal.append(42, 7, 1, b"first").unwrap();
        journal.commit(crate::Durability::Sync).unwrap();
        drop(journal);
        let (journal, _) = Journal::open(dir.path(), options()).unwrap();
        assert_eq!((journal.first_seq(), journal.last_seq()), (Some(42), 42));
        let mut reader = JournalReader::open(dir.path()).unwrap();
        let record = reader.poll().unwrap().expect("the first record");
        assert_eq!((record.seq, record.payload), (42, &b"first"[..]));
        assert_eq!(crate::journal_first_seq(dir.path()).unwrap(), Some(42));
    }

    #[test]
    fn a_journal_that_holds_segments_cannot_start_later() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), options()).unwrap();
        journal.append(1, 0, 1, b"x").unwrap();
        journal.commit(crate::Durability::Sync).unwrap();
        drop(journal);
        let error = start_journal_after(dir.path(), 10, options()).unwrap_err();
        assert!(
            error.to_string().contains("already holds segments"),
            "{error}"
        );
    }
}
