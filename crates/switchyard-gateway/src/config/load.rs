//! Reading a config: TOML text or a file, parsed with field paths, then validated whole.

use std::path::Path;

use super::Config;
use super::error::ConfigError;
use super::validate;

impl Config {
    /// Reads, parses and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Parses and validates TOML text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config = parse_with_paths(text)?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        validate::validate(self)
    }
}

/// Deserializes while tracking the path of the field being read, so an unknown key or a
/// wrong type is reported as `routing.cache_aware.match_threshold`, not just a line number.
fn parse_with_paths(text: &str) -> Result<Config, ConfigError> {
    let deserializer = toml::Deserializer::parse(text)
        .map_err(|e| ConfigError::invalid("<toml>", e.message().to_string()))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        ConfigError::invalid(
            if path == "." { "<root>".into() } else { path },
            inner.message().to_string(),
        )
    })
}
