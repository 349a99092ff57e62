//! Budget arithmetic and the warmup planner:
//! `warmup_budget = total_quota × (1 − business_peak_share) × safety`, and
//! `max warmups = budget ÷ effective mean warmup cost`. A plan that does not fit is
//! reported with the numbers and the options an operator has.

use serde::Serialize;

use crate::config::{BudgetConfig, ResourceConfig, ResourceKind, Tier};

/// Tokens warmup may spend per period.
pub fn warmup_budget(config: &BudgetConfig) -> u64 {
    let budget = config.total_quota as f64 * (1.0 - config.business_peak_share) * config.safety;
    // The epsilon absorbs float noise (1e6 × 0.22 × 0.8 is not exactly 176000 in binary).
    (budget + 1e-6).floor().max(0.0) as u64
}

/// What the planner needs besides the config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanInputs {
    /// Mean tokens per quota-spending warmup (measured, or the configured estimates).
    pub mean_cost_tokens: f64,
    /// Total requests / first attempts; multiplies the cost (every retry of a warmup is paid
    /// again).
    pub retry_amplification: f64,
    /// L1 frequency factor in force (degradation level 1 halves it).
    pub scheduled_frequency: f64,
}

/// Planned warmups of one tier per period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierDemand {
    pub tier: Tier,
    /// Quota-spending resources of the tier.
    pub resources: usize,
    pub warmups_per_period: u64,
    /// E.g. "20 resources × every 30 min = 960/day".
    pub description: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanReport {
    pub budget_tokens: u64,
    pub mean_cost_tokens: f64,
    /// Mean cost × retry amplification × cascade factor.
    pub effective_cost_tokens: f64,
    pub max_warmups: u64,
    pub demand: Vec<TierDemand>,
    pub planned_warmups: u64,
    pub fits: bool,
    /// Set when the plan does not fit, e.g. "L0: 20 resources × every 30 min = 960/day > 146 allowed".
    pub message: Option<String>,
    pub options: Vec<String>,
}

/// Plans scheduled (L0 and L1) warmups of quota-spending resources against the budget.
/// L2 warms on demand and is not planned; connection and context warmups spend no quota.
pub fn plan(budget: &BudgetConfig, resources: &[ResourceConfig], inputs: PlanInputs) -> PlanReport {
    let budget_tokens = warmup_budget(budget);
    let amplification = inputs.retry_amplification.max(1.0);
    let effective_cost = inputs.mean_cost_tokens * amplification * budget.cascade_factor;
    let max_warmups = if effective_cost > 0.0 {
        (budget_tokens as f64 / effective_cost).floor() as u64
    } else {
        u64::MAX
    };
    let period_ms = budget.period_secs.saturating_mul(1000);
    let unit = if budget.period_secs == 86_400 {
        "day"
    } else {
        "period"
    };
    let spending: Vec<&ResourceConfig> = resources
        .iter()
        .filter(|r| matches!(r.kind, ResourceKind::Instance | ResourceKind::Cache))
        .collect();
    let demand: Vec<TierDemand> = [Tier::L0, Tier::L1]
        .into_iter()
        .filter_map(|tier| {
            let of_tier: Vec<&&ResourceConfig> =
                spending.iter().filter(|r| r.tier == tier).collect();
            if of_tier.is_empty() {
                return None;
            }
            let warmups: u64 = of_tier
                .iter()
                .map(|r| per_period(r, period_ms, inputs.scheduled_frequency))
                .sum();
            Some(TierDemand {
                tier,
                resources: of_tier.len(),
                warmups_per_period: warmups,
                description: describe(tier, &of_tier, warmups, unit, inputs.scheduled_frequency),
            })
        })
        .collect();
    let planned: u64 = demand.iter().map(|d| d.warmups_per_period).sum();
    let fits = planned <= max_warmups;
    let (message, options) = if fits {
        (None, Vec::new())
    } else {
        let parts: Vec<String> = demand.iter().map(|d| d.description.clone()).collect();
        let message = format!("{} > {max_warmups} allowed", parts.join("; "));
        let options = over_plan_options(
            budget,
            &demand,
            &spending,
            max_warmups,
            planned,
            effective_cost,
        );
        (Some(message), options)
    };
    PlanReport {
        budget_tokens,
        mean_cost_tokens: inputs.mean_cost_tokens,
        effective_cost_tokens: effective_cost,
        max_warmups,
        demand,
        planned_warmups: planned,
        fits,
        message,
        options,
    }
}

/// Scheduled warmups of one resource per period.
fn per_period(resource: &ResourceConfig, period_ms: u64, scheduled_frequency: f64) -> u64 {
    let interval_ms = resource.interval_secs.saturating_mul(1000).max(1);
    match resource.tier {
        Tier::L0 => period_ms.div_ceil(interval_ms),
        Tier::L1 => {
            let interval = (interval_ms as f64 / scheduled_frequency.max(f64::MIN_POSITIVE)) as u64;
            let lead = resource.lead_time_secs.saturating_mul(1000);
            let per_day: u64 = resource
                .peak_windows
                .iter()
                .map(|w| {
                    (lead + w.length_ms())
                        .min(86_400_000)
                        .div_ceil(interval.max(1))
                })
                .sum();
            // Peak windows are daily; scale to the budget period.
            (per_day as f64 * period_ms as f64 / 86_400_000.0).ceil() as u64
        }
        Tier::L2 => 0,
    }
}

fn describe(
    tier: Tier,
    resources: &[&&ResourceConfig],
    warmups: u64,
    unit: &str,
    scheduled_frequency: f64,
) -> String {
    let count = resources.len();
    let noun = if count == 1 { "resource" } else { "resources" };
    let first = resources[0].interval_secs;
    let mut interval = if resources.iter().all(|r| r.interval_secs == first) {
        format!("every {}", minutes(first))
    } else {
        "mixed intervals".to_string()
    };
    if tier == Tier::L1 {
        let windows: usize = resources.iter().map(|r| r.peak_windows.len()).sum();
        let slower = if scheduled_frequency < 1.0 {
            format!(" (frequency × {scheduled_frequency})")
        } else {
            String::new()
        };
        interval = format!("{interval}{slower} across {windows} peak windows");
    }
    format!("{tier}: {count} {noun} × {interval} = {warmups}/{unit}")
}

fn minutes(secs: u64) -> String {
    if secs % 60 == 0 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

fn over_plan_options(
    budget: &BudgetConfig,
    demand: &[TierDemand],
    spending: &[&ResourceConfig],
    max_warmups: u64,
    planned: u64,
    effective_cost: f64,
) -> Vec<String> {
    let mut options = Vec::new();
    let period_secs = budget.period_secs as f64;
    let others: u64 = demand
        .iter()
        .filter(|d| d.tier != Tier::L0)
        .map(|d| d.warmups_per_period)
        .sum();
    if let Some(l0) = demand.iter().find(|d| d.tier == Tier::L0) {
        let room = max_warmups.saturating_sub(others);
        if room == 0 {
            options.push(
                "lower the L0 keep-alive frequency: not enough on its own, L1 alone uses the \
                 whole budget"
                    .to_string(),
            );
        } else {
            let interval = (l0.resources as f64 * period_secs / room as f64).ceil() as u64;
            options.push(format!(
                "lower the L0 keep-alive frequency to every {} or less often ({} L0 warmups \
                 fit)",
                minutes(interval.div_ceil(60) * 60),
                room
            ));
            let mean_interval: f64 = spending
                .iter()
                .filter(|r| r.tier == Tier::L0)
                .map(|r| r.interval_secs as f64)
                .sum::<f64>()
                / l0.resources as f64;
            let per_resource = (period_secs / mean_interval).ceil().max(1.0);
            let keep = (room as f64 / per_resource).floor() as usize;
            options.push(format!(
                "move {} of the {} L0 resources to L1 (warm before peaks) or L2 (lazy)",
                l0.resources.saturating_sub(keep),
                l0.resources
            ));
        }
    }
    let headroom = budget.total_quota as f64 * (1.0 - budget.business_peak_share);
    let needed_safety = planned as f64 * effective_cost / headroom.max(1.0);
    if needed_safety <= 1.0 {
        options.push(format!(
            "accept a higher quota water level: the plan needs safety {needed_safety:.2} \
             instead of {} ({:.0} tokens/period)",
            budget.safety,
            planned as f64 * effective_cost
        ));
    } else {
        options.push(format!(
            "a higher quota water level is not enough: the plan needs {:.0} tokens/period, \
             more than the {headroom:.0} left outside business peaks",
            planned as f64 * effective_cost
        ));
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PeakWindow;

    fn instances(count: usize, tier: Tier, interval_secs: u64) -> Vec<ResourceConfig> {
        (0..count)
            .map(|i| {
                let mut r = ResourceConfig::new(format!("r{i}"), ResourceKind::Instance, tier);
                r.target.model = Some("m".into());
                r.estimated_cost_tokens = 1_200;
                r.interval_secs = interval_secs;
                r
            })
            .collect()
    }

    fn inputs(mean: f64) -> PlanInputs {
        PlanInputs {
            mean_cost_tokens: mean,
            retry_amplification: 1.0,
            scheduled_frequency: 1.0,
        }
    }

    #[test]
    fn seed_example_budget_and_over_plan_report() {
        let budget = BudgetConfig::default();
        assert_eq!(warmup_budget(&budget), 176_000);
        let report = plan(&budget, &instances(20, Tier::L0, 1_800), inputs(1_200.0));
        assert_eq!(report.max_warmups, 146);
        assert_eq!(report.planned_warmups, 960);
        assert!(!report.fits);
        assert_eq!(
            report.message.as_deref(),
            Some("L0: 20 resources × every 30 min = 960/day > 146 allowed")
        );
        assert_eq!(report.options.len(), 3, "{:?}", report.options);
        // 20 resources × 86400 s / 146 = 11835 s → every 198 min.
        assert!(
            report.options[0].contains("every 198 min"),
            "{}",
            report.options[0]
        );
        // 146 / 48 per resource = 3 can stay.
        assert!(
            report.options[1].starts_with("move 17 of the 20"),
            "{}",
            report.options[1]
        );
        assert!(
            report.options[2].contains("water level is not enough"),
            "{}",
            report.options[2]
        );
    }

    #[test]
    fn retry_amplification_shrinks_what_fits_and_l1_counts_its_spans() {
        let budget = BudgetConfig::default();
        let mut l1 = instances(2, Tier::L1, 1_800);
        for r in &mut l1 {
            r.peak_windows = vec![PeakWindow::try_from("09:00-11:00".to_string()).unwrap()];
        }
        // Span = 20 min lead + 120 min window = 140 min → 5 warmups at 30 min intervals.
        let report = plan(&budget, &l1, inputs(1_200.0));
        assert_eq!(report.planned_warmups, 10);
        assert!(report.fits);
        let halved = plan(
            &budget,
            &l1,
            PlanInputs {
                scheduled_frequency: 0.5,
                ..inputs(1_200.0)
            },
        );
        assert_eq!(halved.planned_warmups, 6, "every 60 min: 3 per span");
        let amplified = plan(
            &budget,
            &l1,
            PlanInputs {
                retry_amplification: 1.6,
                ..inputs(1_200.0)
            },
        );
        assert_eq!(amplified.max_warmups, 91, "176000 / (1200 × 1.6)");
    }

    #[test]
    fn plans_that_fit_report_no_options_and_free_kinds_are_not_planned() {
        let budget = BudgetConfig::default();
        let mut resources = instances(2, Tier::L0, 3_600);
        resources.push(ResourceConfig::new(
            "conn",
            ResourceKind::Connection,
            Tier::L0,
        ));
        let report = plan(&budget, &resources, inputs(1_200.0));
        assert_eq!(report.planned_warmups, 48);
        assert!(report.fits && report.message.is_none() && report.options.is_empty());
    }
}
