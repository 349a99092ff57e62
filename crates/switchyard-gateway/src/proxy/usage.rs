//! Finds the token usage a worker reports at the end of its response, without buffering the
//! response: only a bounded tail of the bytes is kept, and `usage` comes last in both the
//! non-streaming JSON body and the final SSE chunk of a stream with `include_usage`.
//! It also counts the stream's SSE events, a floor on the tokens generated that holds even
//! when the worker reports nothing or too little.

const KEEP: usize = 4096;

/// Reported usage is believed up to this multiple of the reservation plus
/// [`CEILING_SLACK`]: a worker reporting absurd numbers cannot bill a caller without bound.
const CEILING_FACTOR: u64 = 4;
const CEILING_SLACK: u64 = 1 << 20;

/// SSE events of a stream that carry no generated token: the role-only first chunk, the
/// usage chunk and `[DONE]`.
const EVENTS_WITHOUT_TOKENS: u64 = 3;

const DATA_FIELD: &[u8] = b"data:";

#[derive(Debug)]
pub struct UsageSniffer {
    tail: Vec<u8>,
    /// `data:` lines seen so far.
    data_events: u64,
    /// Bytes of `data:` matched at the start of the current line; `None` once the line
    /// cannot start with it.
    matching: Option<usize>,
}

impl Default for UsageSniffer {
    fn default() -> Self {
        Self {
            tail: Vec::new(),
            data_events: 0,
            matching: Some(0),
        }
    }
}

impl UsageSniffer {
    pub fn observe(&mut self, bytes: &[u8]) {
        self.count_data_lines(bytes);
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * KEEP {
            let cut = self.tail.len() - KEEP;
            self.tail.drain(..cut);
        }
    }

    /// Counts lines starting with `data:`, across frame boundaries. A newline inside JSON
    /// text is escaped, so a raw newline only ever ends an SSE line. Every response passes
    /// through here, so only line starts are compared; the rest of a line is skipped by a
    /// search for its newline.
    fn count_data_lines(&mut self, mut bytes: &[u8]) {
        loop {
            if let Some(matched) = self.matching {
                let wanted = &DATA_FIELD[matched..];
                let same = wanted
                    .iter()
                    .zip(bytes)
                    .take_while(|(want, got)| want == got)
                    .count();
                if same == wanted.len() {
                    self.data_events = self.data_events.saturating_add(1);
                    self.matching = None;
                } else if same == bytes.len() {
                    // The frame ended inside a possible `data:`.
                    self.matching = Some(matched + same);
                    return;
                } else {
                    self.matching = None;
                }
                bytes = &bytes[same..];
            }
            let Some(newline) = find_newline(bytes) else {
                return;
            };
            bytes = &bytes[newline + 1..];
            self.matching = Some(0);
        }
    }

    /// The tokens to settle a request with: the reported usage capped at a sanity ceiling
    /// derived from the reservation, never below the tokens the stream visibly carried; with
    /// no report, the larger of the reservation and that floor.
    pub fn settled_tokens(&self, estimate: u64) -> u64 {
        let floor = self.data_events.saturating_sub(EVENTS_WITHOUT_TOKENS);
        match self.total_tokens() {
            Some(reported) => reported
                .min(
                    estimate
                        .saturating_mul(CEILING_FACTOR)
                        .saturating_add(CEILING_SLACK),
                )
                .max(floor),
            None => estimate.max(floor),
        }
    }

    /// `completion_tokens` (the Responses API's `output_tokens`) of the last usage object
    /// seen, if any.
    pub fn completion_tokens(&self) -> Option<u64> {
        let at = find_last(&self.tail, b"\"usage\"")?;
        let rest = &self.tail[at..];
        number_after(rest, b"\"completion_tokens\"")
            .or_else(|| number_after(rest, b"\"output_tokens\""))
    }

    /// `prompt_tokens + completion_tokens` of the last usage object seen, if any; else its
    /// `total_tokens` (the Responses API's `input_tokens`/`output_tokens`, vLLM's rerank).
    pub fn total_tokens(&self) -> Option<u64> {
        let at = find_last(&self.tail, b"\"usage\"")?;
        let rest = &self.tail[at..];
        match number_after(rest, b"\"prompt_tokens\"") {
            Some(prompt) => Some(
                prompt.saturating_add(number_after(rest, b"\"completion_tokens\"").unwrap_or(0)),
            ),
            None => number_after(rest, b"\"total_tokens\""),
        }
    }
}

/// The index of the first newline in `bytes`, eight bytes compared at a time: every byte of
/// every response passes through here.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        if let Ok(word) = <[u8; 8]>::try_from(chunk) {
            // Zero bytes where `word` has newlines; the expression is nonzero exactly when
            // some byte is zero.
            let word = u64::from_ne_bytes(word) ^ NEWLINES;
            if word.wrapping_sub(ONES) & !word & HIGHS != 0 {
                return chunk.iter().position(|&b| b == b'\n').map(|at| offset + at);
            }
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|at| offset + at)
}

// Every response passes through these at its end, so they compare only where the needle's
// first byte (a quote) occurs instead of at every offset, and read digits without a buffer.

fn find_first(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = haystack.len().checked_sub(needle.len())?;
    (0..=last_start)
        .find(|&at| haystack[at] == first && &haystack[at + 1..at + needle.len()] == rest)
}

/// A needle of a length known at compile time is compared at each position as a few integer
/// loads, not through `memcmp`: JSON has a quote every few bytes, so filtering positions on
/// the needle's first byte saved little.
fn find_last<const N: usize>(haystack: &[u8], needle: &[u8; N]) -> Option<usize> {
    if N == 0 {
        return None;
    }
    haystack.windows(N).rposition(|window| window == needle)
}

/// The unsigned integer after `key` (and any whitespace or colons); `None` without digits
/// or past `u64::MAX`.
fn number_after(haystack: &[u8], key: &[u8]) -> Option<u64> {
    let at = find_first(haystack, key)? + key.len();
    let mut digits = haystack[at..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace() || **b == b':')
        .take_while(|b| b.is_ascii_digit())
        .peekable();
    digits.peek()?;
    digits.try_fold(0u64, |n, digit| {
        n.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_and_numbers_agree_with_the_plain_definitions() {
        let hay = br#"x"usage":{"prompt_tokens": 12,"a":"usage","total_tokens":18446744073709551615,"big":18446744073709551616,"none":x}"usage""#;
        macro_rules! agree {
            ($needle:expr) => {
                let needle: &[u8] = $needle;
                assert_eq!(
                    find_first(hay, needle),
                    hay.windows(needle.len()).position(|w| w == needle)
                );
                assert_eq!(
                    find_last(hay, $needle),
                    hay.windows(needle.len()).rposition(|w| w == needle)
                );
            };
        }
        agree!(b"\"usage\"");
        agree!(b"\"a\"");
        agree!(b"x");
        agree!(b"\"missing\"");
        agree!(b"}\"usage\"");
        assert_eq!(find_last(b"ab", b"abc"), None);
        assert_eq!(find_last(b"ab", b""), None);
        assert_eq!(number_after(hay, b"\"prompt_tokens\""), Some(12));
        assert_eq!(number_after(hay, b"\"total_tokens\""), Some(u64::MAX));
        assert_eq!(number_after(hay, b"\"big\""), None, "past u64::MAX");
        assert_eq!(number_after(hay, b"\"none\""), None, "no digits");
        assert_eq!(number_after(hay, b"\"missing\""), None);
    }

    /// The byte-at-a-time definition the line counter must agree with.
    fn data_lines_byte_by_byte(frames: &[&[u8]]) -> u64 {
        let (mut events, mut matching) = (0u64, Some(0usize));
        for &byte in frames.iter().flat_map(|f| f.iter()) {
            if byte == b'\n' {
                matching = Some(0);
                continue;
            }
            matching = match matching {
                Some(n) if n < DATA_FIELD.len() && DATA_FIELD[n] == byte => {
                    if n + 1 == DATA_FIELD.len() {
                        events += 1;
                    }
                    Some(n + 1)
                }
                _ => None,
            };
        }
        events
    }

    proptest::proptest! {
        #[test]
        fn data_lines_are_counted_as_byte_by_byte_whatever_the_framing(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(&b"data:"[..]),
                    proptest::strategy::Just(&b"da"[..]),
                    proptest::strategy::Just(&b"ta: {}"[..]),
                    proptest::strategy::Just(&b"\n"[..]),
                    proptest::strategy::Just(&b"\n\n"[..]),
                    proptest::strategy::Just(&b"x"[..]),
                    proptest::strategy::Just(&b"event: e\n"[..]),
                ],
                0..40,
            ),
            cuts in proptest::collection::vec(0usize..64, 0..8),
        ) {
            let bytes: Vec<u8> = pieces.concat();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut frames: Vec<&[u8]> = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                frames.push(&bytes[from..cut]);
                from = cut;
            }
            let mut sniffer = UsageSniffer::default();
            for frame in &frames {
                sniffer.observe(frame);
            }
            proptest::prop_assert_eq!(sniffer.data_events, data_lines_byte_by_byte(&frames));
        }
    }

    proptest::proptest! {
        #[test]
        fn newlines_are_found_where_a_byte_by_byte_search_finds_them(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => proptest::prelude::any::<u8>(),
                    1 => proptest::strategy::Just(b'\n'),
                    1 => proptest::strategy::Just(b'\x0b'),
                    1 => proptest::strategy::Just(b'\x8a'),
                ],
                0..80,
            ),
        ) {
            proptest::prop_assert_eq!(
                find_newline(&bytes),
                bytes.iter().position(|&b| b == b'\n')
            );
        }
    }

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
    fn absurd_usage_is_capped_and_cannot_overflow() {
        let mut sniffer = UsageSniffer::default();
        sniffer.observe(
            format!(
                "{{\"usage\":{{\"prompt_tokens\":{max},\"completion_tokens\":{max}}}}}",
                max = u64::MAX
            )
            .as_bytes(),
        );
        assert_eq!(sniffer.total_tokens(), Some(u64::MAX));
        assert_eq!(sniffer.settled_tokens(100), 400 + CEILING_SLACK);
    }

    #[test]
    fn a_stream_without_usage_is_billed_at_least_its_events() {
        let mut sniffer = UsageSniffer::default();
        sniffer.observe(b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n");
        for i in 0..1500 {
            // Split mid-field so the count must carry across frames.
            let event =
                format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"data: {i}\"}}}}]}}\n\n");
            let (a, b) = event.split_at(3);
            sniffer.observe(a.as_bytes());
            sniffer.observe(b.as_bytes());
        }
        sniffer.observe(b"data: [DONE]\n\n");
        assert_eq!(sniffer.total_tokens(), None);
        assert_eq!(sniffer.settled_tokens(263), 1500 - 1);
        assert_eq!(sniffer.settled_tokens(5000), 5000);
        // A worker under-reporting is billed the visible floor.
        sniffer.observe(
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n",
        );
        assert_eq!(sniffer.settled_tokens(263), 1500 - 1 + 1);
    }

    #[test]
    fn responses_and_rerank_usage_count_their_total() {
        let mut sniffer = UsageSniffer::default();
        sniffer.observe(b"event: response.created\ndata: {\"response\":{\"usage\":null}}\n\n");
        sniffer.observe(b"event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens\":9,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":5,\"total_tokens\":14}}}\n\n");
        assert_eq!(sniffer.total_tokens(), Some(14));
        assert_eq!(sniffer.completion_tokens(), Some(5));
        let mut rerank = UsageSniffer::default();
        rerank.observe(
            br#"{"results":[{"index":0,"relevance_score":0.9}],"usage":{"total_tokens":31}}"#,
        );
        assert_eq!(rerank.total_tokens(), Some(31));
    }

    #[test]
    fn no_usage_means_none() {
        let mut sniffer = UsageSniffer::default();
        sniffer.observe(b"data: {\"choices\":[]}\n\n");
        assert_eq!(sniffer.total_tokens(), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            #[test]
            fn any_bytes_keep_the_tail_bounded_and_settle_within_bounds(
                frames in proptest::collection::vec(
                    proptest::collection::vec(any::<u8>(), 0..3000), 0..8),
                estimate in any::<u64>(),
            ) {
                let mut sniffer = UsageSniffer::default();
                for frame in &frames {
                    sniffer.observe(frame);
                    prop_assert!(sniffer.tail.len() <= 2 * KEEP);
                }
                let settled = sniffer.settled_tokens(estimate);
                let ceiling = estimate.saturating_mul(CEILING_FACTOR).saturating_add(CEILING_SLACK);
                let floor = sniffer.data_events.saturating_sub(EVENTS_WITHOUT_TOKENS);
                prop_assert!(settled >= floor);
                match sniffer.total_tokens() {
                    None => prop_assert!(settled >= estimate),
                    Some(_) => prop_assert!(settled <= ceiling.max(floor)),
                }
            }

            #[test]
            fn reported_usage_is_found_however_the_frames_split(
                prompt in any::<u32>(),
                completion in any::<u32>(),
                cut in 0usize..120,
            ) {
                let body = format!(
                    "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion}}}}}\n\ndata: [DONE]\n\n"
                );
                let cut = cut.min(body.len());
                let mut sniffer = UsageSniffer::default();
                sniffer.observe(&body.as_bytes()[..cut]);
                sniffer.observe(&body.as_bytes()[cut..]);
                prop_assert_eq!(
                    sniffer.total_tokens(),
                    Some(u64::from(prompt) + u64::from(completion))
                );
            }
        }
    }
}
