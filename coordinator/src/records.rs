//! What the coordinator keeps in etcd under `/ladder/<cluster>/` (CONTRACT 22): the leader's
//! record on `leader` (held by its lease), the last term on `term`, the sequence through which
//! the cluster holds its records for good on `acknowledged` (no node holding less runs for
//! leader by itself), and each node's position on `nodes/<node id>` (held by that node's
//! lease), from which a standby learns whether another holds more than it does before it runs
//! for leader.

use serde::{Deserialize, Serialize};

/// The value of `/ladder/<cluster>/leader`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderRecord {
    /// The leader's node id.
    pub node_id: String,
    /// Its client URL (`http://host:port`): where writes go.
    pub url: String,
    /// Its replication address (`host:port`): where standbys follow it.
    pub replication: String,
    /// Its term: one more than the one before, at every change of leader.
    pub term: u64,
}

/// The value of `/ladder/<cluster>/nodes/<node id>`: how much of the journal a node holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The node id.
    pub node_id: String,
    /// The last sequence it holds durably.
    pub held: u64,
    /// The newest term its journal holds.
    pub term: u64,
}

impl NodeRecord {
    /// Whether this node holds at least what `other` holds: a newer term, or the same term
    /// and as many records (a journal of a newer term wins whatever its length: the records
    /// past the term's start on an older one were never acknowledged).
    pub fn holds_at_least(&self, other: &NodeRecord) -> bool {
        (self.term, self.held) >= (other.term, other.held)
    }
}

/// The value of `/ladder/<cluster>/acknowledged`: how far the cluster holds its records for
/// good, published by the leader of `term` once its standbys hold them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AcknowledgedRecord {
    /// The leader's term (a standby that holds `seq` holds this term's first record).
    pub term: u64,
    /// The last record `--replicas` standbys (at least one) held.
    pub seq: u64,
}

impl NodeRecord {
    /// Whether this node holds every record `acknowledged` names: a newer term (whose leader
    /// held them to be elected, and whose first record follows them), or the same term and
    /// at least `seq`.
    pub fn holds_acknowledged(&self, acknowledged: &AcknowledgedRecord) -> bool {
        self.term > acknowledged.term
            || (self.term == acknowledged.term && self.held >= acknowledged.seq)
    }
}

/// The keys of one cluster.
#[derive(Clone, Debug)]
pub struct Keys {
    /// `/ladder/<cluster>/leader`.
    pub leader: String,
    /// `/ladder/<cluster>/term`.
    pub term: String,
    /// `/ladder/<cluster>/acknowledged`.
    pub acknowledged: String,
    /// `/ladder/<cluster>/nodes/`.
    pub nodes: String,
}

impl Keys {
    /// The keys of cluster `cluster`.
    pub fn of(cluster: &str) -> Keys {
        Keys {
            leader: format!("/ladder/{cluster}/leader"),
            term: format!("/ladder/{cluster}/term"),
            acknowledged: format!("/ladder/{cluster}/acknowledged"),
            nodes: format!("/ladder/{cluster}/nodes/"),
        }
    }

    /// The key of node `node_id`'s record.
    pub fn node(&self, node_id: &str) -> String {
        format!("{}{node_id}", self.nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_record_has_the_contract_fields() {
        let record = LeaderRecord {
            node_id: "a".into(),
            url: "http://127.0.0.1:8080".into(),
            replication: "127.0.0.1:9000".into(),
            term: 3,
        };
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(
            text,
            r#"{"node_id":"a","url":"http://127.0.0.1:8080","replication":"127.0.0.1:9000","term":3}"#
        );
        assert_eq!(serde_json::from_str::<LeaderRecord>(&text).unwrap(), record);
    }

    #[test]
    fn what_the_cluster_acknowledged_is_held_by_a_newer_term_or_as_many_records_of_its_own() {
        let node = |term, held| NodeRecord {
            node_id: "n".into(),
            held,
            term,
        };
        let acknowledged = AcknowledgedRecord {
            term: 6,
            seq: 1_050,
        };
        assert!(node(6, 1_050).holds_acknowledged(&acknowledged));
        assert!(node(7, 10).holds_acknowledged(&acknowledged));
        assert!(!node(6, 1_049).holds_acknowledged(&acknowledged));
        // An older term's longer journal holds records the newer leader never had.
        assert!(!node(5, 1_100).holds_acknowledged(&acknowledged));
        assert!(node(0, 0).holds_acknowledged(&AcknowledgedRecord::default()));
    }

    #[test]
    fn a_newer_term_holds_more_whatever_its_length() {
        let node = |term, held| NodeRecord {
            node_id: "n".into(),
            held,
            term,
        };
        assert!(node(2, 10).holds_at_least(&node(1, 50)));
        assert!(node(1, 50).holds_at_least(&node(1, 50)));
        assert!(!node(1, 49).holds_at_least(&node(1, 50)));
        assert!(!node(1, 50).holds_at_least(&node(2, 0)));
    }
}
