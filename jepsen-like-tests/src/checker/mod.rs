//! Checkers judge a history plus the final state read from every node. Each returns a
//! [`Verdict`]: valid, invalid (with the offending operations) or unknown (could not judge).

mod availability;
mod budget;
mod config;
mod convergence;
pub mod linearizable;
mod lost_writes;
mod override_rules;
mod verdict;

use crate::history::History;
use crate::state::FinalStates;

pub use availability::{AvailabilityChecker, NO_FAULT, WindowStats, availability_by_fault};
pub use budget::BudgetSafetyChecker;
pub use config::CheckConfig;
pub use convergence::ConvergenceChecker;
pub use linearizable::OverrideLinearizabilityChecker;
pub use lost_writes::LostWritesChecker;
pub use override_rules::OverrideRulesChecker;
pub use verdict::{CheckInput, Checker, MAX_OPS_PER_VIOLATION, Validity, Verdict, Violation};

/// Every checker of the suite, in report order.
pub fn all_checkers() -> Vec<Box<dyn Checker>> {
    vec![
        Box::new(BudgetSafetyChecker),
        Box::new(LostWritesChecker),
        Box::new(OverrideRulesChecker),
        Box::new(ConvergenceChecker),
        Box::new(AvailabilityChecker),
        Box::new(OverrideLinearizabilityChecker),
    ]
}

/// Runs every checker; a malformed history is reported as one invalid verdict.
pub fn check_all(
    history: &History,
    final_states: &FinalStates,
    config: &CheckConfig,
) -> Vec<Verdict> {
    match CheckInput::new(history, final_states, config) {
        Ok(input) => all_checkers().iter().map(|c| c.check(&input)).collect(),
        Err(e) => vec![Verdict::from_findings(
            "history",
            vec![Violation::new(e.to_string(), Vec::new())],
            Vec::new(),
            false,
        )],
    }
}
