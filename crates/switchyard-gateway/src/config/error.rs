//! Config errors, each naming the field it is about.

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {message}")]
    Read { path: String, message: String },
    #[error("config error at `{path}`: {message}")]
    Invalid { path: String, message: String },
}

impl ConfigError {
    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// An admin key must not be guessable: at least `MIN_SECRET_LEN` characters.
pub(crate) fn check_admin_key_strength(field: &str, key: &str) -> Result<(), ConfigError> {
    if key.len() < crate::cluster::MIN_SECRET_LEN {
        return Err(ConfigError::invalid(
            field,
            format!(
                "must be at least {} characters",
                crate::cluster::MIN_SECRET_LEN
            ),
        ));
    }
    Ok(())
}
