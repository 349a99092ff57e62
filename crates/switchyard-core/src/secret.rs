//! A configured secret (tenant API key, admin key, cluster secret). It serialises and prints as
//! `<redacted>`, so no admin response, config-audit entry or log line can carry the text; code
//! that needs the text asks for it with [`Secret::expose`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::Cell;
use std::fmt;

/// What a non-empty secret serialises and prints as.
pub const REDACTED: &str = "<redacted>";

thread_local! {
    static EXPOSED: Cell<bool> = const { Cell::new(false) };
}

/// A secret string. It serialises as [`REDACTED`], set or not (an unset one may be set
/// elsewhere, by an environment variable), except inside [`with_secrets_exposed`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The secret's text, for the one place that checks or sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Length in bytes (validation of minimum strength).
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Self {
        Self(text.to_string())
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("Secret(\"\")")
        } else {
            write!(f, "Secret({REDACTED})")
        }
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if EXPOSED.with(Cell::get) {
            serializer.serialize_str(&self.0)
        } else {
            serializer.serialize_str(REDACTED)
        }
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

/// Runs `f` with secrets serialising as their text on this thread: for the config's own
/// round trips (editing one field through its JSON form, diffing two configs), never for
/// anything that leaves the process.
pub fn with_secrets_exposed<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            EXPOSED.with(|e| e.set(self.0));
        }
    }
    let _restore = Restore(EXPOSED.with(|e| e.replace(true)));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, Debug)]
    struct Holder {
        key: Secret,
        unset: Secret,
    }

    #[test]
    fn serialises_and_prints_redacted_unless_exposed() {
        let holder = Holder {
            key: Secret::from("sk-very-secret-value"),
            unset: Secret::default(),
        };
        let json = serde_json::to_string(&holder).unwrap();
        assert_eq!(json, r#"{"key":"<redacted>","unset":"<redacted>"}"#);
        let debug = format!("{holder:?}");
        assert!(!debug.contains("sk-very"), "{debug}");
        let exposed = with_secrets_exposed(|| serde_json::to_string(&holder).unwrap());
        assert!(exposed.contains("sk-very-secret-value"));
        // The scope ends with the call, panics included.
        assert_eq!(serde_json::to_string(&holder).unwrap(), json);
        let back: Holder = serde_json::from_str(&exposed).unwrap();
        assert_eq!(back.key.expose(), "sk-very-secret-value");
    }
}
