/// Why an `Admission` could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error("admission config error at `{field}`: {message}")]
    InvalidConfig { field: String, message: String },
    #[error("admission metrics setup failed: {0}")]
    Metrics(#[from] prometheus::Error),
}

impl AdmissionError {
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        AdmissionError::InvalidConfig {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The config field an `InvalidConfig` names.
    pub fn field(&self) -> Option<&str> {
        match self {
            AdmissionError::InvalidConfig { field, .. } => Some(field),
            AdmissionError::Metrics(_) => None,
        }
    }
}
