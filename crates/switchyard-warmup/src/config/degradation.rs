//! The `[degradation]` section: graded degradation thresholds and level parameters, model
//! downgrade chains, per-model prompt profiles and the response cache.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

use crate::degradation::level::Level;
use crate::error::{ConfigError, invalid};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DegradationConfig {
    /// Off: signals are recorded but never change the level (forcing still works).
    pub enabled: bool,
    /// Budget water level that is only recorded and warned about.
    pub warn_at: f64,
    /// Water level that enters level 1 (conservative).
    pub level1_at: f64,
    /// Water level that enters level 3 (survival), through level 2.
    pub level3_at: f64,
    /// Level the overload detector's "overloaded" state demands. 1 by default: overload alone
    /// must not black out a class. Level 2 demotes non-core callers, and while the gateway
    /// is overloaded the least urgent class (P2) is paused, so a level driven by overload
    /// alone keeps every caller's class; the budget water level still walks 2 on its way to 3.
    pub overload_level: Level,
    /// Level held while the detector reports "recovering".
    pub recovering_level: Level,
    /// Recovering, the level improves by at most one step per this long.
    pub recovery_step_secs: u64,
    /// A level that failed to apply is not attempted again sooner than this.
    pub failed_retry_secs: u64,
    /// Level 1 and worse: concurrency limit as a share of its configured peak, applied only
    /// when the budget water level (or an operator) calls for the level: after an overload,
    /// capacity is admission's recovery ramp's job.
    pub concurrency_ratio: f64,
    /// Level 1: L1 warmup frequency factor (0.5 halves it).
    pub scheduled_frequency: f64,
    /// Level 2 and worse: non-core callers start this many links down a downgrade chain.
    pub shrink_skip_links: usize,
    /// Level 3 keeps L0 keep-alives running (off: every warmup stops at the hard limit).
    pub survival_keeps_l0: bool,
    /// Audit entries (forces, drills, failures) kept in memory.
    pub audit_capacity: usize,
    /// Text of the friendly error at the end of every downgrade chain.
    pub fallback_message: String,
    pub chains: Vec<ChainConfig>,
    pub profiles: Vec<ModelProfile>,
    pub cache: ResponseCacheConfig,
}

impl Default for DegradationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            warn_at: 0.70,
            level1_at: 0.80,
            level3_at: 0.95,
            overload_level: Level::Conservative,
            recovering_level: Level::Conservative,
            recovery_step_secs: 300,
            failed_retry_secs: 30,
            concurrency_ratio: 0.8,
            scheduled_frequency: 0.5,
            shrink_skip_links: 1,
            survival_keeps_l0: false,
            audit_capacity: 256,
            fallback_message: "The service is very busy right now and cannot answer this \
                               request. Please try again in a few minutes."
                .into(),
            chains: Vec::new(),
            profiles: Vec::new(),
            cache: ResponseCacheConfig::default(),
        }
    }
}

/// A model alias and the models it falls back through, best first. After the last model
/// come the cache fallback (if enabled) and the friendly error.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    pub alias: String,
    pub models: Vec<String>,
    #[serde(default = "yes")]
    pub cache_fallback: bool,
}

/// What a model accepts, for prompt normalisation when a request moves down to it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ModelProfile {
    pub model: String,
    /// False: the system prompt is folded into the first user message.
    #[serde(default = "yes")]
    pub system_role: bool,
    /// Most conversation messages kept (newest first; the system prompt is not counted).
    /// 0: no limit.
    #[serde(default)]
    pub max_history_messages: u32,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ResponseCacheConfig {
    pub enabled: bool,
    pub max_entries: usize,
    /// Bound on cached request keys plus answers.
    pub max_bytes: usize,
    /// Older answers are never served.
    pub max_age_secs: u64,
    /// Case-insensitive substrings that make a prompt time-sensitive: it skips the cache.
    pub time_sensitive_patterns: Vec<String>,
}

impl Default for ResponseCacheConfig {
    fn default() -> Self {
        let patterns = [
            "today",
            "tonight",
            "tomorrow",
            "yesterday",
            "right now",
            "latest",
            "current",
            "breaking",
            "news",
            "weather",
            "stock price",
            "this week",
            "今天",
            "明天",
            "昨天",
            "现在",
            "最新",
            "实时",
            "新闻",
            "天气",
            "股价",
        ];
        Self {
            enabled: true,
            max_entries: 10_000,
            max_bytes: 64 * 1024 * 1024,
            max_age_secs: 86_400,
            time_sensitive_patterns: patterns.iter().map(|p| (*p).to_string()).collect(),
        }
    }
}

impl DegradationConfig {
    /// Checks every value; the error names the field, e.g. `degradation.chains[0].models`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let share = |field: &str, value: f64| {
            if value.is_finite() && value > 0.0 && value <= 1.0 {
                Ok(())
            } else {
                Err(invalid(
                    field,
                    format!("must be within (0, 1], got {value}"),
                ))
            }
        };
        share("degradation.warn_at", self.warn_at)?;
        share("degradation.level1_at", self.level1_at)?;
        share("degradation.level3_at", self.level3_at)?;
        if !(self.warn_at <= self.level1_at && self.level1_at < self.level3_at) {
            return Err(invalid(
                "degradation.level1_at",
                "thresholds must satisfy warn_at <= level1_at < level3_at",
            ));
        }
        if self.recovery_step_secs == 0 {
            return Err(invalid("degradation.recovery_step_secs", "must be > 0"));
        }
        if self.failed_retry_secs == 0 {
            return Err(invalid("degradation.failed_retry_secs", "must be > 0"));
        }
        share("degradation.concurrency_ratio", self.concurrency_ratio)?;
        share("degradation.scheduled_frequency", self.scheduled_frequency)?;
        if self.audit_capacity == 0 {
            return Err(invalid("degradation.audit_capacity", "must be > 0"));
        }
        if self.fallback_message.trim().is_empty() {
            return Err(invalid("degradation.fallback_message", "must not be empty"));
        }
        let mut aliases = HashSet::new();
        for (index, chain) in self.chains.iter().enumerate() {
            let at = |field: &str| format!("degradation.chains[{index}].{field}");
            if chain.alias.is_empty() || !aliases.insert(chain.alias.as_str()) {
                return Err(invalid(at("alias"), "must be non-empty and unique"));
            }
            if chain.models.is_empty() || chain.models.iter().any(String::is_empty) {
                return Err(invalid(
                    at("models"),
                    "must name at least one model, none empty",
                ));
            }
        }
        let mut models = HashSet::new();
        for (index, profile) in self.profiles.iter().enumerate() {
            if profile.model.is_empty() || !models.insert(profile.model.as_str()) {
                return Err(invalid(
                    format!("degradation.profiles[{index}].model"),
                    "must be non-empty and unique",
                ));
            }
        }
        let cache = &self.cache;
        if cache.max_entries == 0 || cache.max_bytes == 0 || cache.max_age_secs == 0 {
            return Err(invalid(
                "degradation.cache",
                "max_entries, max_bytes and max_age_secs must be > 0",
            ));
        }
        if let Some(index) = cache
            .time_sensitive_patterns
            .iter()
            .position(|p| p.trim().is_empty())
        {
            return Err(invalid(
                format!("degradation.cache.time_sensitive_patterns[{index}]"),
                "must not be empty",
            ));
        }
        Ok(())
    }

    pub fn chain(&self, alias: &str) -> Option<&ChainConfig> {
        self.chains.iter().find(|chain| chain.alias == alias)
    }

    pub fn profile(&self, model: &str) -> Option<&ModelProfile> {
        self.profiles.iter().find(|profile| profile.model == model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_errors_name_fields() {
        assert_eq!(DegradationConfig::default().validate(), Ok(()));
        let mut config = DegradationConfig {
            level1_at: 0.96,
            ..Default::default()
        };
        assert_eq!(
            config.validate().unwrap_err().field,
            "degradation.level1_at"
        );
        config.level1_at = 0.8;
        config.chains = vec![ChainConfig {
            alias: "a".into(),
            models: vec![],
            cache_fallback: true,
        }];
        assert_eq!(
            config.validate().unwrap_err().field,
            "degradation.chains[0].models"
        );
    }

    #[test]
    fn parses_toml_with_levels_as_numbers() {
        let config: DegradationConfig = toml::from_str(
            r#"
            overload_level = 3
            [[chains]]
            alias = "flagship"
            models = ["big", "mid", "small"]
            [[profiles]]
            model = "mid"
            system_role = false
            max_history_messages = 4
            "#,
        )
        .unwrap();
        assert_eq!(config.overload_level, Level::Survival);
        assert!(config.chain("flagship").unwrap().cache_fallback);
        assert!(!config.profile("mid").unwrap().system_role);
        assert!(toml::from_str::<DegradationConfig>("overload_level = 4").is_err());
        assert!(toml::from_str::<DegradationConfig>("levle1_at = 0.5").is_err());
    }
}
