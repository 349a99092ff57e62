use serde::Serialize;
use serde_json::Value;
use switchyard_core::with_secrets_exposed;

use crate::config::{Config, ConfigError};

/// One changed field, by dotted path.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Change {
    pub path: String,
    pub old: Value,
    pub new: Value,
}

/// Every leaf that differs between two configs, as dotted paths (arrays compare whole).
/// A changed secret is found (its text is compared) but recorded as `<redacted>`: the old
/// and new values come from the configs' ordinary, redacting serialisation.
pub fn diff_configs(old: &Config, new: &Config) -> Vec<Change> {
    let exposed = with_secrets_exposed(|| (serde_json::to_value(old), serde_json::to_value(new)));
    let (Ok(old_exposed), Ok(new_exposed)) = exposed else {
        return Vec::new();
    };
    let (Ok(old), Ok(new)) = (serde_json::to_value(old), serde_json::to_value(new)) else {
        return Vec::new();
    };
    let mut changes = Vec::new();
    diff_values("", &old_exposed, &new_exposed, &mut changes);
    for change in &mut changes {
        change.old = value_at(&old, &change.path);
        change.new = value_at(&new, &change.path);
    }
    changes
}

fn value_at(tree: &Value, path: &str) -> Value {
    path.split('.')
        .try_fold(tree, |node, key| node.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

fn diff_values(path: &str, old: &Value, new: &Value, out: &mut Vec<Change>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                let null = Value::Null;
                diff_values(
                    &child,
                    a.get(key).unwrap_or(&null),
                    b.get(key).unwrap_or(&null),
                    out,
                );
            }
        }
        (a, b) if a != b => out.push(Change {
            path: path.to_string(),
            old: a.clone(),
            new: b.clone(),
        }),
        _ => {}
    }
}

/// Returns `config` with the field at dotted `path` set to `value`; the result is parsed
/// and type-checked as a whole, so a wrong type is reported with its path.
pub fn set_path(config: &Config, path: &str, value: Value) -> Result<Config, ConfigError> {
    // Secrets round-trip as their text: the edited config keeps them.
    let mut tree = with_secrets_exposed(|| serde_json::to_value(config))
        .map_err(|e| ConfigError::invalid(path, e.to_string()))?;
    let mut node = &mut tree;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let Value::Object(map) = node else {
            return Err(ConfigError::invalid(path, "not a configuration section"));
        };
        let Some(next) = map.get_mut(*part) else {
            return Err(ConfigError::invalid(path, "unknown field"));
        };
        if i + 1 == parts.len() {
            *next = value;
            break;
        }
        node = next;
    }
    serde_path_to_error::deserialize(tree).map_err(|e| {
        let at = e.path().to_string();
        ConfigError::invalid(at, e.into_inner().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_lists_changed_leaves_by_path() {
        let old = Config::default();
        let mut new = Config::default();
        new.retry.max_retries = 0;
        new.upstream.request_timeout_ms = 7;
        let paths: Vec<String> = diff_configs(&old, &new)
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(
            paths,
            vec!["retry.max_retries", "upstream.request_timeout_ms"]
        );
        assert!(diff_configs(&old, &old).is_empty());
    }

    #[test]
    fn set_path_checks_names_and_types() {
        let config = Config::default();
        let next = set_path(&config, "retry.max_retries", serde_json::json!(1)).unwrap();
        assert_eq!(next.retry.max_retries, 1);
        let unknown = set_path(&config, "retry.max_retires", serde_json::json!(1)).unwrap_err();
        assert!(unknown.to_string().contains("retry.max_retires"));
        let wrong = set_path(&config, "retry.max_retries", serde_json::json!("x")).unwrap_err();
        assert!(wrong.to_string().contains("retry.max_retries"), "{wrong}");
    }

    #[test]
    fn secrets_survive_an_edit_and_their_changes_are_listed_but_redacted() {
        let mut config = Config::default();
        config.admin.api_key = "admin-key-0123456789".into();
        config.cluster.secret = "cluster-secret-0123456789".into();
        let next = set_path(&config, "retry.max_retries", serde_json::json!(1)).unwrap();
        assert_eq!(next.admin.api_key.expose(), "admin-key-0123456789");
        assert_eq!(next.cluster.secret.expose(), "cluster-secret-0123456789");
        let mut rotated = config.clone();
        rotated.cluster.secret = "cluster-secret-rotated-0001".into();
        let changes = diff_configs(&config, &rotated);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "cluster.secret");
        let text = serde_json::to_string(&changes).unwrap();
        assert!(!text.contains("cluster-secret"), "{text}");
    }
}
