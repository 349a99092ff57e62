//! Timing one streamed probe the way traffic is judged: time to the first token, then time
//! per output token, each against the threshold that clears an overload mark.

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use std::time::Duration;
use tokio::time::Instant;

use super::decisions::ProbeResult;
use crate::config::{HealthConfig, ms};
use crate::http_client::{FetchError, HttpClient, send};

/// What one probe measured. Tokio's clock, so tests can run it in paused time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ProbeTiming {
    /// From sending the request to the first body bytes (the whole answer if not streamed).
    pub ttft: Duration,
    /// Between the first and the last token event, per token after the first; None when the
    /// answer carried fewer than two (a worker that does not stream).
    pub tpot: Option<Duration>,
}

/// The probe's verdict: healthy only if it would pass the latency judge's recovery test.
pub(crate) fn judge(timing: ProbeTiming, config: &HealthConfig) -> ProbeResult {
    let l = &config.latency_aware;
    let slow_first = timing.ttft >= ms(l.recover_ttft_p90_ms);
    let slow_tokens = timing
        .tpot
        .is_some_and(|tpot| tpot >= ms(l.recover_tpot_p90_ms));
    if slow_first || slow_tokens {
        ProbeResult::Slow
    } else {
        ProbeResult::Success
    }
}

/// Sends the probe and reads its stream to the end within `bound`. A non-2xx status is
/// returned as is, untimed.
pub(crate) async fn timed_probe(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    bound: Duration,
) -> Result<Result<ProbeTiming, http::StatusCode>, FetchError> {
    let exchange = async {
        let started = Instant::now();
        let response = send(client, request).await?;
        let status = response.status();
        if !status.is_success() {
            return Ok(Err(status));
        }
        let mut body = response.into_body();
        let mut first: Option<Instant> = None;
        let mut last = started;
        let mut tokens = 0u32;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| FetchError::Transport(e.to_string()))?;
            let Some(data) = frame.data_ref().filter(|data| !data.is_empty()) else {
                continue;
            };
            let now = Instant::now();
            first.get_or_insert(now);
            let events = token_events(data);
            if events > 0 {
                tokens += events;
                last = now;
            }
        }
        let first = first.unwrap_or_else(Instant::now);
        let tpot = (tokens >= 2).then(|| last.saturating_duration_since(first) / (tokens - 1));
        Ok(Ok(ProbeTiming {
            ttft: first.saturating_duration_since(started),
            tpot,
        }))
    };
    tokio::time::timeout(bound, exchange)
        .await
        .map_err(|_| FetchError::Timeout(bound))?
}

/// Server-sent `data:` events in a chunk, the final `[DONE]` excluded.
fn token_events(chunk: &[u8]) -> u32 {
    const EVENT: &[u8] = b"data:";
    const DONE: &[u8] = b"[DONE]";
    let mut count = 0;
    let mut at = 0;
    while let Some(offset) = chunk[at..].windows(EVENT.len()).position(|w| w == EVENT) {
        at += offset + EVENT.len();
        let rest = chunk[at..].trim_ascii_start();
        if !rest.starts_with(DONE) {
            count += 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(recover_ttft_ms: u64, recover_tpot_ms: u64) -> HealthConfig {
        let mut config = HealthConfig::default();
        config.latency_aware.recover_ttft_p90_ms = recover_ttft_ms;
        config.latency_aware.recover_tpot_p90_ms = recover_tpot_ms;
        config
    }

    fn timing(ttft_ms: u64, tpot_ms: Option<u64>) -> ProbeTiming {
        ProbeTiming {
            ttft: Duration::from_millis(ttft_ms),
            tpot: tpot_ms.map(Duration::from_millis),
        }
    }

    #[test]
    fn a_probe_passes_only_under_both_recovery_thresholds() {
        let c = config(1000, 15);
        assert_eq!(judge(timing(20, Some(5)), &c), ProbeResult::Success);
        // Fast first token, slow decode: the case a one-token probe could not see.
        assert_eq!(judge(timing(20, Some(100)), &c), ProbeResult::Slow);
        assert_eq!(judge(timing(1000, Some(5)), &c), ProbeResult::Slow);
        // A worker that does not stream is judged on its whole answer.
        assert_eq!(judge(timing(900, None), &c), ProbeResult::Success);
    }

    /// A worker streaming `tokens` SSE events: the first after `ttft`, then one per `tpot`.
    async fn streaming_worker(ttft: Duration, tpot: Duration, tokens: u32) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/completions", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&request).contains("\"stream\":true") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "request cut short");
                request.extend_from_slice(&buf[..n]);
            }
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            socket.write_all(head.as_bytes()).await.unwrap();
            for index in 0..=tokens {
                let event = if index == tokens {
                    "data: [DONE]\n\n".to_string()
                } else {
                    tokio::time::sleep(if index == 0 { ttft } else { tpot }).await;
                    format!("data: {{\"choices\":[{{\"text\":\"t{index}\"}}]}}\n\n")
                };
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                socket.write_all(chunk.as_bytes()).await.unwrap();
            }
            socket.write_all(b"0\r\n\r\n").await.unwrap();
        });
        url
    }

    async fn probe_worker(ttft_ms: u64, tpot_ms: u64) -> ProbeTiming {
        let url = streaming_worker(
            Duration::from_millis(ttft_ms),
            Duration::from_millis(tpot_ms),
            8,
        )
        .await;
        let client = crate::http_client::build_http_client(&Default::default());
        let body = r#"{"model":"m","prompt":"p","max_tokens":8,"stream":true}"#;
        let request = Request::post(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        timed_probe(&client, request, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap()
    }

    /// Paused tokio time: the worker's delays are exact, so are the measurements.
    #[tokio::test(start_paused = true)]
    async fn a_worker_still_slow_to_decode_fails_the_probe_and_a_recovered_one_passes() {
        // Scaled like benches/figures/kill_worker.sh: recover below TTFT 1 s, TPOT 15 ms.
        let c = config(1000, 15);
        // Slowed x20: a short prompt still starts at once, but every token takes 100 ms.
        let slow = probe_worker(30, 100).await;
        assert_eq!(slow.ttft, Duration::from_millis(30));
        assert_eq!(slow.tpot, Some(Duration::from_millis(100)));
        assert_eq!(judge(slow, &c), ProbeResult::Slow);
        let recovered = probe_worker(30, 5).await;
        assert_eq!(recovered.tpot, Some(Duration::from_millis(5)));
        assert_eq!(judge(recovered, &c), ProbeResult::Success);
    }

    #[test]
    fn token_events_skip_done_and_count_coalesced_events() {
        assert_eq!(token_events(b"data: {\"a\":1}\n\n"), 1);
        assert_eq!(token_events(b"data: {}\n\ndata: {}\n\ndata: [DONE]\n\n"), 2);
        assert_eq!(token_events(b"{\"choices\":[]}"), 0);
    }
}
