//! How simulated clients react to 429/503: honour `Retry-After`, retry on a fixed period
//! regardless of it, or give up. A run mixes such client groups (`--client-retry`).

use std::time::Duration;

use http::StatusCode;

use crate::LoadError;
use crate::mix::WeightedMix;

/// `Retry-After` beyond this is not believed: a well-behaved client still caps its wait.
pub const MAX_HONOURED_WAIT: Duration = Duration::from_secs(60);
/// What an honouring client waits when a refusal carries no usable `Retry-After`.
pub const HONOUR_FALLBACK_WAIT: Duration = Duration::from_secs(1);
pub const DEFAULT_MAX_CLIENT_RETRIES: u32 = 5;
/// Upper bound on `--max-client-retries`, part of the tool's hard bound on attempts.
pub const MAX_CLIENT_RETRIES_LIMIT: u32 = 20;

/// One client group's behaviour after a 429 or 503.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientRetryMode {
    /// Give up at once (the behaviour without `--client-retry`).
    Never,
    /// Wait what `Retry-After` says, then retry with `x-switchyard-retry-count: k`.
    HonourRetryAfter,
    /// Wait this fixed period whatever the answer said, and retry without a retry count.
    Fixed(Duration),
}

impl ClientRetryMode {
    /// Group name in the report, as given on the command line (`honor`, `fixed1s`, `none`).
    pub fn label(self) -> String {
        match self {
            Self::Never => "none".to_owned(),
            Self::HonourRetryAfter => "honor".to_owned(),
            Self::Fixed(period) if period.subsec_millis() == 0 => {
                format!("fixed{}s", period.as_secs())
            }
            Self::Fixed(period) => format!("fixed{}ms", period.as_millis()),
        }
    }

    /// How long to wait before retrying an attempt answered `status`; `None` = do not retry.
    pub fn wait_before_retry(
        self,
        status: StatusCode,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        if !is_retryable(status) {
            return None;
        }
        match self {
            Self::Never => None,
            Self::HonourRetryAfter => Some(
                retry_after
                    .unwrap_or(HONOUR_FALLBACK_WAIT)
                    .min(MAX_HONOURED_WAIT),
            ),
            Self::Fixed(period) => Some(period),
        }
    }

    /// Whether retries of this group announce themselves with `x-switchyard-retry-count`.
    pub fn sends_retry_count(self) -> bool {
        self == Self::HonourRetryAfter
    }

    fn parse(name: &str) -> Result<Self, String> {
        let name = name.to_ascii_lowercase();
        match name.as_str() {
            "none" | "never" => return Ok(Self::Never),
            "honor" | "honour" => return Ok(Self::HonourRetryAfter),
            _ => {}
        }
        let period = name
            .strip_prefix("fixed")
            .and_then(parse_period)
            .ok_or_else(|| {
                format!("unknown client behaviour {name:?} (honor, fixed1s, fixed500ms, none)")
            })?;
        if period.is_zero() || period > MAX_HONOURED_WAIT {
            return Err(format!("fixed period {period:?} must be within (0, 60 s]"));
        }
        Ok(Self::Fixed(period))
    }
}

/// Statuses a client treats as "come back later".
pub fn is_retryable(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    )
}

fn parse_period(text: &str) -> Option<Duration> {
    if let Some(millis) = text.strip_suffix("ms") {
        return millis.parse::<u64>().ok().map(Duration::from_millis);
    }
    let seconds: f64 = text.strip_suffix('s')?.parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// `Retry-After` in delta-seconds (the form the gateway sends); HTTP dates are ignored.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// `retry-after-ms`: a non-negative number of milliseconds.
pub fn parse_retry_after_ms(value: &str) -> Option<Duration> {
    let millis: f64 = value.trim().parse().ok()?;
    Duration::try_from_secs_f64(millis / 1000.0).ok()
}

/// `--client-retry honor:0.5,fixed1s:0.5`: each request draws its client group from these.
pub type ClientRetryMix = WeightedMix<ClientRetryMode>;

pub fn parse_client_retry_mix(spec: &str) -> Result<ClientRetryMix, LoadError> {
    WeightedMix::parse(spec, "client retry mix", ClientRetryMode::parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn parses_groups_and_labels_them_as_written() {
        let mix =
            parse_client_retry_mix("honor:0.5,fixed1s:0.25,fixed250ms:0.125,none:0.125").unwrap();
        let modes: Vec<ClientRetryMode> = mix.options().map(|(mode, _)| *mode).collect();
        assert_eq!(
            modes,
            [
                ClientRetryMode::HonourRetryAfter,
                ClientRetryMode::Fixed(SECOND),
                ClientRetryMode::Fixed(Duration::from_millis(250)),
                ClientRetryMode::Never,
            ]
        );
        let labels: Vec<String> = modes.iter().map(|mode| mode.label()).collect();
        assert_eq!(labels, ["honor", "fixed1s", "fixed250ms", "none"]);
        assert!(parse_client_retry_mix("fixed0s:1").is_err());
        assert!(parse_client_retry_mix("fixed120s:1").is_err());
        assert!(parse_client_retry_mix("sometimes:1").is_err());
    }

    #[test]
    fn honouring_clients_wait_what_they_are_told_within_a_cap() {
        let honour = ClientRetryMode::HonourRetryAfter;
        let told = Some(Duration::from_secs(7));
        assert_eq!(
            honour.wait_before_retry(StatusCode::SERVICE_UNAVAILABLE, told),
            told
        );
        assert_eq!(
            honour.wait_before_retry(StatusCode::TOO_MANY_REQUESTS, None),
            Some(HONOUR_FALLBACK_WAIT)
        );
        let absurd = Some(Duration::from_secs(3600));
        assert_eq!(
            honour.wait_before_retry(StatusCode::TOO_MANY_REQUESTS, absurd),
            Some(MAX_HONOURED_WAIT)
        );
        assert!(honour.sends_retry_count());
    }

    #[test]
    fn fixed_clients_ignore_retry_after_and_nobody_retries_other_statuses() {
        let fixed = ClientRetryMode::Fixed(SECOND);
        let told = Some(Duration::from_secs(30));
        assert_eq!(
            fixed.wait_before_retry(StatusCode::SERVICE_UNAVAILABLE, told),
            Some(SECOND)
        );
        assert!(!fixed.sends_retry_count());
        for mode in [
            fixed,
            ClientRetryMode::HonourRetryAfter,
            ClientRetryMode::Never,
        ] {
            for status in [
                StatusCode::BAD_GATEWAY,
                StatusCode::GATEWAY_TIMEOUT,
                StatusCode::UNAUTHORIZED,
            ] {
                assert_eq!(
                    mode.wait_before_retry(status, told),
                    None,
                    "{mode:?} {status}"
                );
            }
        }
        assert_eq!(
            ClientRetryMode::Never.wait_before_retry(StatusCode::TOO_MANY_REQUESTS, told),
            None
        );
    }

    #[test]
    fn retry_after_reads_delta_seconds_only() {
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(
            parse_retry_after_ms("1500"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after_ms("x"), None);
        assert_eq!(parse_retry_after_ms("-3"), None);
    }
}
