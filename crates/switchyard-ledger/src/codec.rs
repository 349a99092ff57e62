//! bincode (serde) for everything the ledger puts on disk or on the wire.

use serde::Serialize;
use serde::de::DeserializeOwned;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("encode: {0}")]
    Encode(#[from] bincode::error::EncodeError),
    #[error("decode: {0}")]
    Decode(#[from] bincode::error::DecodeError),
}

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    Ok(bincode::serde::encode_to_vec(
        value,
        bincode::config::standard(),
    )?)
}

/// Most bytes one decode may claim (allocate) for its collections and strings: a corrupt or
/// hostile length prefix fails here instead of allocating before anything is read. Far
/// above any real message, snapshot or log entry.
pub const DECODE_LIMIT_BYTES: usize = 256 * 1024 * 1024;

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let config = bincode::config::standard().with_limit::<DECODE_LIMIT_BYTES>();
    let (value, _) = bincode::serde::decode_from_slice(bytes, config)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_length_prefix_is_refused_without_allocating_it() {
        // Varint marker 253: a u64 length follows, here 2^40 bytes of string.
        let mut bytes = vec![253u8];
        bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
        bytes.extend_from_slice(b"abc");
        assert!(matches!(
            decode::<String>(&bytes),
            Err(CodecError::Decode(
                bincode::error::DecodeError::LimitExceeded
            ))
        ));
        assert!(decode::<Vec<u64>>(&bytes).is_err());
        let ok = encode(&"fine".to_string()).unwrap();
        assert_eq!(decode::<String>(&ok).unwrap(), "fine");
    }

    mod props {
        use super::super::*;
        use crate::command::{Command, WriteRequest};
        use crate::raft_types::TypeConfig;
        use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
        use proptest::prelude::*;

        /// Every body a Raft or ledger RPC handler decodes, from arbitrary bytes: an error or
        /// a value, never a panic or a runaway allocation.
        fn decode_every_rpc_body(bytes: &[u8]) {
            let _ = decode::<AppendEntriesRequest<TypeConfig>>(bytes);
            let _ = decode::<VoteRequest<u64>>(bytes);
            let _ = decode::<InstallSnapshotRequest<TypeConfig>>(bytes);
            let _ = decode::<WriteRequest>(bytes);
            let _ = decode::<Command>(bytes);
            let _ = decode::<crate::node::reads::ReadQuery>(bytes);
            let _ = decode::<crate::node::MembershipChange>(bytes);
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
                decode_every_rpc_body(&bytes);
            }

            #[test]
            fn huge_length_prefixes_anywhere_never_panic(
                prefix in proptest::collection::vec(any::<u8>(), 0..32),
                len in any::<u64>(),
                suffix in proptest::collection::vec(any::<u8>(), 0..32),
            ) {
                let mut bytes = prefix;
                bytes.push(253);
                bytes.extend_from_slice(&len.to_le_bytes());
                bytes.extend_from_slice(&suffix);
                decode_every_rpc_body(&bytes);
            }
        }
    }
}
