//! Finds the token usage a worker reports at the end of its response, without buffering the
//! response: only a bounded tail of the bytes is kept, and `usage` comes last in both the
//! non-streaming JSON body and the final SSE chunk of a stream with `include_usage`.

const KEEP: usize = 4096;

#[derive(Debug, Default)]
pub struct UsageSniffer {
    tail: Vec<u8>,
}

impl UsageSniffer {
    pub fn observe(&mut self, bytes: &[u8]) {
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * KEEP {
            let cut = self.tail.len() - KEEP;
            self.tail.drain(..cut);
        }
    }

    /// `completion_tokens` of the last usage object seen, if any.
    pub fn completion_tokens(&self) -> Option<u64> {
        let at = find_last(&self.tail, b"\"usage\"")?;
        number_after(&self.tail[at..], b"\"completion_tokens\"")
    }

    /// `prompt_tokens + completion_tokens` of the last usage object seen, if any.
    pub fn total_tokens(&self) -> Option<u64> {
        let at = find_last(&self.tail, b"\"usage\"")?;
        let rest = &self.tail[at..];
        let prompt = number_after(rest, b"\"prompt_tokens\"")?;
        let completion = number_after(rest, b"\"completion_tokens\"").unwrap_or(0);
        Some(prompt + completion)
    }
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

fn number_after(haystack: &[u8], key: &[u8]) -> Option<u64> {
    let at = haystack.windows(key.len()).position(|w| w == key)? + key.len();
    let digits: Vec<u8> = haystack[at..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace() || **b == b':')
        .take_while(|b| b.is_ascii_digit())
        .copied()
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_usage_in_a_json_body_split_across_frames() {
        let body = br#"{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens": 12,"completion_tokens":30,"total_tokens":42}}"#;
        let mut sniffer = UsageSniffer::default();
        for chunk in body.chunks(7) {
            sniffer.observe(chunk);
        }
        assert_eq!(sniffer.total_tokens(), Some(42));
    }

    #[test]
    fn finds_the_final_usage_chunk_of_a_long_stream() {
        let mut sniffer = UsageSniffer::default();
        for i in 0..2000 {
            sniffer.observe(
                format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"tok{i} \"}}}}]}}\n\n")
                    .as_bytes(),
            );
        }
        sniffer.observe(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":2000}}\n\ndata: [DONE]\n\n");
        assert_eq!(sniffer.total_tokens(), Some(2100));
        assert!(sniffer.tail.len() <= 2 * KEEP);
    }

    #[test]
    fn no_usage_means_none() {
        let mut sniffer = UsageSniffer::default();
        sniffer.observe(b"data: {\"choices\":[]}\n\n");
        assert_eq!(sniffer.total_tokens(), None);
    }
}
