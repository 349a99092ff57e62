//! The request's routing key as placement and affinity events use it: its hash places and
//! names overrides and events; its text (a prompt prefix, never an identity) may travel in
//! an event.

use crate::routing_key::RoutingKeySource;

/// The request's routing key, as placement and affinity events use it.
#[derive(Clone, Copy)]
pub(super) struct KeyOf<'r> {
    /// `stable_hash` of the key text: the ring position and the override / event key.
    pub(super) hash: u64,
    pub(super) text: &'r str,
    pub(super) source: RoutingKeySource,
}
