//! Identity and tags at the first hop: API key → caller, then priority, purpose and retry
//! count from headers. Tags are fixed here and travel with the request from then on.

use switchyard_core::header_names;
mod key_digest;
mod labels;
mod recent_ids;
mod reserved;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_core::{Priority, Purpose, RequestTags};
use tracing::info;

use crate::config::{AdmissionConfig, AnonymousAccess, TenantConfig};
use key_digest::KeyDigest;
pub use labels::CallerLabels;
use recent_ids::RecentRequestIds;
pub(crate) use reserved::RESERVED_CALLERS;
pub use reserved::{ANONYMOUS, OTHER, UNKNOWN};

// Read on every request: as `HeaderName`s they are looked up without parsing the name.
static API_KEY: HeaderName = HeaderName::from_static(header_names::API_KEY);
static PRIORITY: HeaderName = HeaderName::from_static(header_names::PRIORITY);
static PURPOSE: HeaderName = HeaderName::from_static(header_names::PURPOSE);
static RETRY_COUNT: HeaderName = HeaderName::from_static(header_names::RETRY_COUNT);
static REQUEST_ID: HeaderName = HeaderName::from_static(header_names::REQUEST_ID);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("missing or unknown API key")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    #[error("bad `{header}` header: {message}")]
    BadHeader {
        header: &'static str,
        message: String,
    },
}

/// What a caller may do, resolved from its tenant entry.
#[derive(Clone, Debug)]
struct Profile {
    caller: Arc<str>,
    max_priority: Priority,
    default_priority: Priority,
    core: bool,
    allow_warmup: bool,
}

impl Profile {
    fn anonymous() -> Self {
        Self {
            caller: Arc::from(ANONYMOUS),
            max_priority: Priority::P1,
            default_priority: Priority::P1,
            core: false,
            allow_warmup: false,
        }
    }

    fn of(tenant: &TenantConfig) -> Self {
        Self {
            caller: Arc::from(tenant.caller.as_str()),
            max_priority: tenant.max_priority,
            default_priority: tenant.default_priority(),
            core: tenant.core,
            allow_warmup: tenant.allow_warmup,
        }
    }
}

pub struct Identity {
    /// Tenants by the SHA-256 of their key: the keys themselves are not kept, and a lookup
    /// compares digests in constant time, so timing says nothing about a key's prefix.
    by_api_key: HashMap<KeyDigest, Profile>,
    /// The profile of keyless requests, when they are served at all.
    anonymous: Option<Profile>,
    labels: CallerLabels,
    recent_ids: Option<Mutex<RecentRequestIds>>,
}

impl Identity {
    pub fn new(config: &AdmissionConfig) -> Self {
        let by_api_key: HashMap<KeyDigest, Profile> = config
            .tenants
            .iter()
            .map(|tenant| (KeyDigest::of(tenant.api_key.expose()), Profile::of(tenant)))
            .collect();
        let anonymous = match config.identity.anonymous {
            AnonymousAccess::Auto => by_api_key.is_empty(),
            AnonymousAccess::Allow => true,
            AnonymousAccess::Deny => false,
        };
        if anonymous && by_api_key.is_empty() {
            info!(
                "no admission tenants configured: every request runs unauthenticated as caller `anonymous` at P1"
            );
        } else if anonymous {
            info!("requests without an API key run as caller `anonymous` at P1");
        }
        let window = Duration::from_millis(config.identity.request_id_window_ms);
        let recent_ids = (!window.is_zero()).then(|| {
            Mutex::new(RecentRequestIds::new(
                window,
                config.identity.request_id_capacity,
            ))
        });
        Self {
            by_api_key,
            anonymous: anonymous.then(Profile::anonymous),
            labels: CallerLabels::new(&config.tenants, config.identity.caller_label_top_n),
            recent_ids,
        }
    }

    /// True when no tenant is configured and keyless requests are served: nobody is
    /// authenticated.
    pub fn is_anonymous(&self) -> bool {
        self.by_api_key.is_empty() && self.anonymous.is_some()
    }

    /// Bounded metric label for a caller: its own name within the top N, else `other`.
    pub fn caller_label<'a>(&'a self, caller: &str) -> &'a str {
        self.labels.label(caller)
    }

    /// Resolves the caller and its request tags. Purposes `retry` and `probe` are the
    /// gateway's own and are refused (403) from clients, so nobody can dodge budgets or skew
    /// retry accounting by claiming them; `warmup` needs the tenant's `allow_warmup`.
    pub fn resolve(&self, headers: &HeaderMap, now: Instant) -> Result<RequestTags, IdentityError> {
        let profile = self.profile(headers)?;
        let priority = match header_text(headers, &PRIORITY)? {
            Some(text) => text
                .parse::<Priority>()
                .map_err(|e| bad(header_names::PRIORITY, e.to_string()))?
                .clamp_to(profile.max_priority),
            None => profile.default_priority,
        };
        let purpose = match header_text(headers, &PURPOSE)? {
            Some(text) => text
                .parse::<Purpose>()
                .map_err(|e| bad(header_names::PURPOSE, e.to_string()))?,
            None => Purpose::Business,
        };
        match purpose {
            Purpose::Business => {}
            Purpose::Warmup if profile.allow_warmup => {}
            Purpose::Warmup => {
                return Err(IdentityError::Forbidden(format!(
                    "caller `{}` may not send warmup requests",
                    profile.caller
                )));
            }
            Purpose::Retry | Purpose::Probe => {
                return Err(IdentityError::Forbidden(format!(
                    "purpose `{purpose}` is set by the gateway only"
                )));
            }
        }
        let mut client_retry = match header_text(headers, &RETRY_COUNT)? {
            Some(text) => text.trim().parse::<u32>().map_err(|_| {
                bad(
                    header_names::RETRY_COUNT,
                    format!("expected a count, got `{text}`"),
                )
            })?,
            None => 0,
        };
        if let (Some(recent), Some(id)) = (&self.recent_ids, header_text(headers, &REQUEST_ID)?) {
            let earlier = recent.lock().observe(&profile.caller, id, now);
            client_retry = client_retry.max(earlier);
        }
        Ok(RequestTags {
            caller: profile.caller.clone(),
            purpose,
            priority,
            core_caller: profile.core,
            client_retry,
        })
    }

    fn profile(&self, headers: &HeaderMap) -> Result<&Profile, IdentityError> {
        if self.by_api_key.is_empty() {
            return self.anonymous.as_ref().ok_or(IdentityError::Unauthorized);
        }
        let key = bearer_token(headers)
            .or_else(|| headers.get(&API_KEY).and_then(|v| v.to_str().ok()))
            .map(str::trim)
            .filter(|key| !key.is_empty());
        let Some(key) = key else {
            return self.anonymous.as_ref().ok_or(IdentityError::Unauthorized);
        };
        let digest = KeyDigest::of(key);
        // The map finds the entry by the digest; the stored digest is then compared in
        // constant time, so a hash collision of the map alone never admits anyone.
        self.by_api_key
            .get_key_value(&digest)
            .filter(|(stored, _)| stored.matches(&digest))
            .map(|(_, profile)| profile)
            .ok_or(IdentityError::Unauthorized)
    }
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

fn header_text<'h>(
    headers: &'h HeaderMap,
    name: &'static HeaderName,
) -> Result<Option<&'h str>, IdentityError> {
    headers
        .get(name)
        .map(|value| {
            value
                .to_str()
                .map_err(|_| bad(name.as_str(), "not visible ASCII".into()))
        })
        .transpose()
}

fn bad(header: &'static str, message: String) -> IdentityError {
    IdentityError::BadHeader { header, message }
}

#[cfg(test)]
mod tests;
