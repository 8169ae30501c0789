//! Leader election for Ladder nodes on etcd (CONTRACT 22): the leader is the node holding
//! the lease on `/ladder/<cluster>/leader`; a leader that cannot renew stops acknowledging
//! before its lease can expire anywhere; a standby runs for leader only when it holds every
//! record another live node holds. etcd solves consensus; this crate only uses it.

pub mod acknowledged;
pub mod etcd;
pub mod leadership;
pub mod records;

pub use acknowledged::Acknowledgements;
pub use leadership::{
    AckDeadline, Addresses, Change, Coordinator, CoordinatorConfig, Position, View,
};
pub use records::{AcknowledgedRecord, LeaderRecord, NodeRecord};
