//! `ladder-powercut`: a FUSE filesystem that simulates a disk with a volatile write cache, so
//! that tests can cut the power under the service and see what survives (the role Jepsen's
//! LazyFS plays, in Rust).
//!
//! The mount is a passthrough of a backing directory. Data writes stay in memory, in dirty
//! 4 KiB pages per file ([`overlay`]), until the file is fsynced; metadata reaches the backing
//! directory at once. On SIGUSR1 the dirty pages are lost; on SIGUSR2 (or SIGUSR1 with
//! `--torn`) a random, seeded subset of them persists first, one page per file torn ([`cut`]).
//! [`fs`] is the FUSE filesystem, [`inodes`] its inode table, [`run`] the mount and the signal
//! loop that the binary drives; [`harness`] mounts and cuts it from tests.

pub mod cut;
pub mod fs;
pub mod harness;
pub mod inodes;
pub mod overlay;
pub mod run;
