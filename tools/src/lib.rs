//! Ladder client library.
