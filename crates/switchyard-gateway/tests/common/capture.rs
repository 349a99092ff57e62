//! A fake worker that records what the gateway forwarded.

use switchyard_gateway::Config;
use switchyard_workers::WorkerSpec;

use super::config_for;

/// A fake worker that lists `sim-llama` on `GET /v1/models`, answers every other request with a
/// fixed non-streaming completion and keeps the raw request heads it received, so tests can see
/// what the gateway forwarded.
pub struct CaptureWorker {
    pub url: String,
    pub heads: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CaptureWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CaptureWorker {
    pub async fn start(usage_tokens: (u64, u64)) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heads = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = heads.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let mut read = 0;
                    // One request per connection: read until the body is complete enough.
                    let models_request = loop {
                        match socket.read(&mut buf[read..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => read += n,
                        }
                        let text = String::from_utf8_lossy(&buf[..read]).to_string();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let head = text[..end].to_lowercase();
                            let length: usize = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse().ok())
                                .unwrap_or(0);
                            if read >= end + 4 + length {
                                let models = head.starts_with("get /v1/models");
                                seen.lock().push(head);
                                break models;
                            }
                        }
                    };
                    let body = if models_request {
                        r#"{"object":"list","data":[{"id":"sim-llama","object":"model"}]}"#
                            .to_string()
                    } else {
                        format!(
                            r#"{{"id":"c","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"ok"}}}}],"usage":{{"prompt_tokens":{},"completion_tokens":{},"total_tokens":{}}}}}"#,
                            usage_tokens.0,
                            usage_tokens.1,
                            usage_tokens.0 + usage_tokens.1
                        )
                    };
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                        body.len(),
                        body
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                });
            }
        });
        Self { url, heads, task }
    }

    /// A round-robin gateway config with this worker alone, named `w`.
    pub fn config(&self) -> Config {
        let mut config = config_for(&[], "round_robin");
        config.workers = vec![self.spec("w")];
        config
    }

    pub fn spec(&self, name: &str) -> WorkerSpec {
        WorkerSpec {
            name: name.into(),
            url: self.url.clone(),
            models: Some(vec!["sim-llama".into()]),
            health_path: None,
            engine: None,
        }
    }
}
