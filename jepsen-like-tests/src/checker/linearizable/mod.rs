//! A Wing–Gong linearizability search with Lowe's memoisation, bounded to small histories.
//!
//! Why our own rather than `stateright`'s `LinearizabilityTester`: we need operations with an
//! unknown outcome (`info`: may take effect at any time after the call, or never), a
//! nondeterministic model (overrides may expire between any two operations), memoisation of
//! `(linearized set, state)` so the search stays polynomial on typical histories, and a hard
//! state budget so a pathological history yields "unknown" instead of a hung CI job. That is
//! ~200 lines with no dependencies; the tester would bring a model checker and its runtime.
//!
//! The search: an operation may be linearized next if it was called before every
//! not-yet-linearized `ok` operation returned. Success when every `ok` operation is placed;
//! `info` operations may be placed or not.

mod bits;
mod engine;
mod override_model;

pub use engine::{Linearization, Model, SearchLimits, search, truncate};
pub use override_model::{OverrideLinearizabilityChecker, OverrideRegistryModel};

#[cfg(test)]
mod tests;
