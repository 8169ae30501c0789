//! Ladder's memory-mapped, segmented, checksummed append-only journal.
