//! Which node of which cluster a data dir belongs to. Written on first start, checked on every
//! later one: a voter started on another node's directory (or another cluster's) would vote
//! and append with a log and vote that are not its own, which breaks Raft's safety.

use redb::{Database, ReadableTable};

use super::db::{META, StoreError};

const NODE_ID: &str = "identity.node_id";
const CLUSTER_ID: &str = "identity.cluster_id";

/// Binds the database to `(node_id, cluster_id)` if it is not bound yet; refuses a mismatch.
pub fn bind(db: &Database, node_id: u64, cluster_id: &str) -> Result<(), StoreError> {
    let txn = db.begin_write()?;
    {
        let mut table = txn.open_table(META)?;
        let stored_node = table.get(NODE_ID)?.map(|v| v.value().to_vec());
        let stored_cluster = table.get(CLUSTER_ID)?.map(|v| v.value().to_vec());
        if let Some(stored) = stored_node {
            let stored = String::from_utf8_lossy(&stored).into_owned();
            if stored != node_id.to_string() {
                return Err(StoreError::Identity {
                    field: "node id",
                    stored,
                    configured: node_id.to_string(),
                });
            }
        }
        if let Some(stored) = stored_cluster {
            let stored = String::from_utf8_lossy(&stored).into_owned();
            if stored != cluster_id {
                return Err(StoreError::Identity {
                    field: "cluster id",
                    stored,
                    configured: cluster_id.to_owned(),
                });
            }
        }
        table.insert(NODE_ID, node_id.to_string().as_bytes())?;
        table.insert(CLUSTER_ID, cluster_id.as_bytes())?;
    }
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::open_database;

    #[test]
    fn a_data_dir_keeps_the_node_and_cluster_it_was_first_opened_for() {
        let dir = tempfile::TempDir::new().unwrap();
        {
            let db = open_database(dir.path()).unwrap();
            bind(&db, 2, "prod").unwrap();
            bind(&db, 2, "prod").unwrap();
        }
        let db = open_database(dir.path()).unwrap();
        let other_node = bind(&db, 3, "prod").unwrap_err();
        assert!(
            other_node.to_string().contains("node id 2") && other_node.to_string().contains('3'),
            "{other_node}"
        );
        let other_cluster = bind(&db, 2, "staging").unwrap_err();
        assert!(
            other_cluster.to_string().contains("cluster id prod"),
            "{other_cluster}"
        );
        bind(&db, 2, "prod").unwrap();
    }
}
