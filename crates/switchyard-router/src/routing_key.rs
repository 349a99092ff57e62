//! The routing key: the one function business traffic and warmup both use to name what a
//! request is "about", so warmup heats exactly the workers business traffic will reach.

use crate::error::{RouterError, invalid};
use serde::{Deserialize, Serialize};

/// Where a routing key came from; also a bounded metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingKeySource {
    /// The session header (`x-session-id` by default).
    Session,
    /// The OpenAI request's `user` field.
    User,
    /// The first `prompt_prefix_bytes` of the prompt.
    PromptPrefix,
}

impl RoutingKeySource {
    pub const ALL: [Self; 3] = [Self::Session, Self::User, Self::PromptPrefix];

    pub fn label(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::User => "user",
            Self::PromptPrefix => "prompt_prefix",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingKeyConfig {
    /// Request header carrying the session id (lower case); the gateway reads it.
    pub session_header: String,
    /// Sources tried in this order; the first one present and non-empty wins.
    pub order: Vec<RoutingKeySource>,
    /// How much of the prompt a `prompt_prefix` key covers, cut back to a character boundary.
    pub prompt_prefix_bytes: u64,
}

impl Default for RoutingKeyConfig {
    fn default() -> Self {
        Self {
            session_header: switchyard_core::header_names::SESSION_ID.into(),
            order: RoutingKeySource::ALL.to_vec(),
            prompt_prefix_bytes: 256,
        }
    }
}

impl RoutingKeyConfig {
    pub fn validate(&self) -> Result<(), RouterError> {
        let header_ok = !self.session_header.is_empty()
            && self
                .session_header
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !header_ok {
            return Err(invalid(
                "routing_key.session_header",
                "must be a non-empty lower-case header name",
                &self.session_header,
            ));
        }
        let mut seen = Vec::with_capacity(self.order.len());
        for source in &self.order {
            if seen.contains(source) {
                return Err(invalid(
                    "routing_key.order",
                    "must not repeat a source",
                    source.label(),
                ));
            }
            seen.push(*source);
        }
        if self.order.is_empty() {
            return Err(invalid(
                "routing_key.order",
                "must name at least one source",
                "[]",
            ));
        }
        if self.prompt_prefix_bytes == 0 {
            return Err(invalid(
                "routing_key.prompt_prefix_bytes",
                "must be > 0",
                self.prompt_prefix_bytes,
            ));
        }
        Ok(())
    }
}

/// Everything a routing key may be derived from.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoutingKeyInputs<'a> {
    /// Value of the session header, if the request had one.
    pub session_id: Option<&'a str>,
    /// The request's `user` field.
    pub user: Option<&'a str>,
    pub prompt: &'a str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutingKey<'a> {
    pub key: &'a str,
    pub source: RoutingKeySource,
}

/// The routing key of a request: the first source in `config.order` that is present and
/// non-empty. None when every source is empty (e.g. an empty prompt and no session or user).
pub fn routing_key<'a>(
    config: &RoutingKeyConfig,
    inputs: &RoutingKeyInputs<'a>,
) -> Option<RoutingKey<'a>> {
    config.order.iter().find_map(|&source| {
        let key = match source {
            RoutingKeySource::Session => inputs.session_id?,
            RoutingKeySource::User => inputs.user?,
            RoutingKeySource::PromptPrefix => {
                leading_chars(inputs.prompt, config.prompt_prefix_bytes)
            }
        };
        (!key.is_empty()).then_some(RoutingKey { key, source })
    })
}

/// At most `max_bytes` of `text`, cut back to a character boundary.
pub(crate) fn leading_chars(text: &str, max_bytes: u64) -> &str {
    let limit = usize::try_from(max_bytes)
        .unwrap_or(usize::MAX)
        .min(text.len());
    let end = (0..=limit)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs<'a>(
        session: Option<&'a str>,
        user: Option<&'a str>,
        prompt: &'a str,
    ) -> RoutingKeyInputs<'a> {
        RoutingKeyInputs {
            session_id: session,
            user,
            prompt,
        }
    }

    #[test]
    fn default_order_prefers_session_then_user_then_prompt_prefix() {
        let config = RoutingKeyConfig::default();
        let key = |i| routing_key(&config, &i).map(|k| (k.key, k.source));
        assert_eq!(
            key(inputs(Some("s1"), Some("u1"), "p")),
            Some(("s1", RoutingKeySource::Session))
        );
        assert_eq!(
            key(inputs(Some(""), Some("u1"), "p")),
            Some(("u1", RoutingKeySource::User)),
            "an empty header counts as absent"
        );
        assert_eq!(
            key(inputs(None, None, "hello")),
            Some(("hello", RoutingKeySource::PromptPrefix))
        );
        assert_eq!(key(inputs(None, Some(""), "")), None);
    }

    #[test]
    fn configured_order_and_prefix_length_are_honoured() {
        let config = RoutingKeyConfig {
            order: vec![RoutingKeySource::PromptPrefix, RoutingKeySource::Session],
            prompt_prefix_bytes: 4,
            ..Default::default()
        };
        let found = routing_key(&config, &inputs(Some("s"), None, "abcdefgh")).unwrap();
        assert_eq!(
            (found.key, found.source),
            ("abcd", RoutingKeySource::PromptPrefix)
        );
        // "é" is two bytes: a 4-byte cut would split the second one.
        let found = routing_key(&config, &inputs(None, None, "aé\u{e9}x")).unwrap();
        assert_eq!(found.key, "aé");
        let users_only = RoutingKeyConfig {
            order: vec![RoutingKeySource::User],
            ..Default::default()
        };
        assert_eq!(
            routing_key(&users_only, &inputs(Some("s"), None, "p")),
            None
        );
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            (
                RoutingKeyConfig {
                    session_header: "X-Session".into(),
                    ..Default::default()
                },
                "routing_key.session_header",
            ),
            (
                RoutingKeyConfig {
                    order: vec![],
                    ..Default::default()
                },
                "routing_key.order",
            ),
            (
                RoutingKeyConfig {
                    order: vec![RoutingKeySource::User, RoutingKeySource::User],
                    ..Default::default()
                },
                "routing_key.order",
            ),
            (
                RoutingKeyConfig {
                    prompt_prefix_bytes: 0,
                    ..Default::default()
                },
                "routing_key.prompt_prefix_bytes",
            ),
        ];
        for (config, field) in cases {
            let error = config.validate().unwrap_err();
            assert!(error.to_string().contains(field), "{error}");
        }
        assert_eq!(RoutingKeyConfig::default().validate(), Ok(()));
    }

    #[test]
    fn deserializes_sources_in_snake_case() {
        let config: RoutingKeyConfig =
            serde_json::from_str(r#"{"order": ["user", "prompt_prefix"]}"#).unwrap();
        assert_eq!(
            config.order,
            vec![RoutingKeySource::User, RoutingKeySource::PromptPrefix]
        );
        assert!(serde_json::from_str::<RoutingKeyConfig>(r#"{"odrer": []}"#).is_err());
    }
}
