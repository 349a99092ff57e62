//! The seeded fault schedule: a quiet baseline, then fault windows separated by gaps, one
//! fault at a time, then a final heal well before the end so recovery is observed. The same
//! seed and configuration give the same schedule (for a given build of `rand`).

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::fault::{Fault, NemesisKind, PartitionShape, Target};
use crate::NodeId;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleConfig {
    pub nodes: Vec<NodeId>,
    /// Length of the whole run.
    pub duration: Duration,
    pub kinds: Vec<NemesisKind>,
    /// No faults at first: the baseline for availability.
    pub quiet_start: Duration,
    /// Bounds of the gap between two windows.
    pub gap: (Duration, Duration),
    /// Bounds of one fault window.
    pub window: (Duration, Duration),
    /// Time between the final heal and the end of the run.
    pub recovery: Duration,
    /// Chance that a kill, pause or isolation targets the leader rather than a random node.
    pub leader_bias: f64,
}

impl ScheduleConfig {
    /// Defaults for a run of `duration`: 5 s quiet start, 5–15 s gaps and windows, 20 s
    /// recovery, each shrunk for short runs (a 120 s run gets about five windows).
    pub fn new(nodes: Vec<NodeId>, duration: Duration, kinds: Vec<NemesisKind>) -> Self {
        let scaled = |d: Duration, share: u32| d.min(duration / share);
        Self {
            nodes,
            duration,
            kinds,
            quiet_start: scaled(Duration::from_secs(5), 10),
            gap: (
                scaled(Duration::from_secs(5), 20),
                scaled(Duration::from_secs(15), 8),
            ),
            window: (
                scaled(Duration::from_secs(5), 20),
                scaled(Duration::from_secs(15), 8),
            ),
            recovery: scaled(Duration::from_secs(20), 4),
            leader_bias: 0.35,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledFault {
    /// Window id (from 1); the final heal is window [`Schedule::HEAL_WINDOW`].
    pub window: u64,
    pub start: Duration,
    pub end: Duration,
    pub fault: Fault,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    pub seed: u64,
    /// Windows in time order, never overlapping, all ending by `heal_at`.
    pub faults: Vec<ScheduledFault>,
    /// When everything is healed, whatever happened.
    pub heal_at: Duration,
    pub end: Duration,
}

fn between(rng: &mut StdRng, (low, high): (Duration, Duration)) -> Duration {
    if high <= low {
        return low;
    }
    rng.random_range(low..=high)
}

fn target(rng: &mut StdRng, nodes: &[NodeId], leader_bias: f64) -> Target {
    match nodes.choose(rng) {
        Some(node) if !rng.random_bool(leader_bias.clamp(0.0, 1.0)) => Target::Node(*node),
        _ => Target::Leader,
    }
}

fn partition(rng: &mut StdRng, nodes: &[NodeId], leader_bias: f64) -> PartitionShape {
    let choice = if nodes.len() >= 3 {
        rng.random_range(0..3)
    } else {
        1
    };
    match choice {
        0 => {
            let minority_size = (nodes.len() - 1) / 2;
            let mut minority: Vec<NodeId> =
                nodes.choose_multiple(rng, minority_size).copied().collect();
            minority.sort_unstable();
            PartitionShape::MajorityMinority { minority }
        }
        2 => PartitionShape::Bridge {
            bridge: nodes.choose(rng).copied().unwrap_or(1),
        },
        _ => PartitionShape::Isolate(target(rng, nodes, leader_bias)),
    }
}

fn make_fault(rng: &mut StdRng, kind: NemesisKind, config: &ScheduleConfig) -> Fault {
    let nodes = &config.nodes;
    let bias = config.leader_bias;
    let any_node = |rng: &mut StdRng| nodes.choose(rng).copied().unwrap_or(1);
    match kind {
        NemesisKind::Kill => Fault::Kill(target(rng, nodes, bias)),
        NemesisKind::Pause => Fault::Pause(target(rng, nodes, bias)),
        NemesisKind::Partition => Fault::Partition(partition(rng, nodes, bias)),
        NemesisKind::Loss => Fault::Loss {
            to: any_node(rng),
            per_mille: rng.random_range(100..=500),
        },
        NemesisKind::Delay => {
            let delay_ms = rng.random_range(50..=500);
            Fault::Delay {
                to: any_node(rng),
                delay_ms,
                jitter_ms: delay_ms / 4,
            }
        }
        NemesisKind::Clock => {
            let magnitude: i64 = rng.random_range(1_000..=30_000);
            let offset_ms = if rng.random_bool(0.5) {
                magnitude
            } else {
                -magnitude
            };
            Fault::ClockSkew {
                target: target(rng, nodes, bias),
                offset_ms,
            }
        }
    }
}

impl Schedule {
    pub const HEAL_WINDOW: u64 = 0;

    pub fn generate(config: &ScheduleConfig, seed: u64) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed);
        let end = config.duration;
        let heal_at = end.saturating_sub(config.recovery);
        let mut faults = Vec::new();
        let mut at = config.quiet_start;
        if !config.kinds.is_empty() && !config.nodes.is_empty() {
            loop {
                let length = between(&mut rng, config.window);
                if at + length > heal_at || length.is_zero() {
                    break;
                }
                let kind = config
                    .kinds
                    .choose(&mut rng)
                    .copied()
                    .unwrap_or(NemesisKind::Kill);
                faults.push(ScheduledFault {
                    window: faults.len() as u64 + 1,
                    start: at,
                    end: at + length,
                    fault: make_fault(&mut rng, kind, config),
                });
                at += length + between(&mut rng, config.gap);
            }
        }
        Schedule {
            seed,
            faults,
            heal_at,
            end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kinds: Vec<NemesisKind>) -> ScheduleConfig {
        ScheduleConfig::new(vec![1, 2, 3, 4, 5], Duration::from_secs(120), kinds)
    }

    #[test]
    fn same_seed_same_schedule_and_seeds_differ() {
        let config = config(NemesisKind::ALL.to_vec());
        assert_eq!(
            Schedule::generate(&config, 7),
            Schedule::generate(&config, 7)
        );
        let distinct: std::collections::HashSet<String> = (0..6)
            .map(|seed| format!("{:?}", Schedule::generate(&config, seed).faults))
            .collect();
        assert!(
            distinct.len() > 1,
            "different seeds must give different schedules"
        );
    }

    #[test]
    fn windows_are_ordered_disjoint_and_end_before_the_heal() {
        for seed in 0..50 {
            let config = config(NemesisKind::ALL.to_vec());
            let schedule = Schedule::generate(&config, seed);
            assert!(
                !schedule.faults.is_empty(),
                "seed {seed}: a 120 s run has faults"
            );
            assert!(schedule.heal_at < schedule.end);
            let mut previous_end = config.quiet_start;
            for fault in &schedule.faults {
                assert!(fault.start >= previous_end, "seed {seed}: overlap");
                assert!(fault.end > fault.start);
                assert!(fault.end <= schedule.heal_at, "seed {seed}: past the heal");
                previous_end = fault.end;
            }
        }
    }

    #[test]
    fn only_enabled_kinds_and_valid_partitions() {
        let kinds = vec![NemesisKind::Partition, NemesisKind::Pause];
        for seed in 0..50 {
            let config = config(kinds.clone());
            for fault in Schedule::generate(&config, seed).faults {
                assert!(kinds.contains(&fault.fault.kind()));
                if let Fault::Partition(PartitionShape::MajorityMinority { minority }) =
                    &fault.fault
                {
                    assert_eq!(minority.len(), 2, "5 nodes: a minority of 2");
                }
            }
        }
    }

    #[test]
    fn no_kinds_means_no_faults_but_still_a_heal() {
        let schedule = Schedule::generate(&config(Vec::new()), 3);
        assert!(schedule.faults.is_empty());
        assert_eq!(schedule.heal_at, Duration::from_secs(100));
    }

    #[test]
    fn parse_list_normalises() {
        assert_eq!(
            NemesisKind::parse_list("pause, kill,pause").unwrap(),
            vec![NemesisKind::Kill, NemesisKind::Pause]
        );
        assert_eq!(NemesisKind::parse_list("all").unwrap().len(), 6);
        assert!(NemesisKind::parse_list("kill,meteor").is_err());
    }
}
