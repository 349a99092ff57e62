//! Incremental Server-Sent-Events framing.
//!
//! TCP (and chunked encoding) may cut an event anywhere — mid-field, mid-UTF-8 character, or
//! between the `\r` and `\n` of a line ending — so bytes are buffered until a whole line is seen.

/// One dispatched SSE event: the concatenated `data:` lines (joined with `\n`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseParser {
    pending: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk of the body and returns every event completed by it.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut line_start = 0;
        let mut index = 0;
        while index < self.pending.len() {
            let terminator_len = match self.pending[index] {
                b'\n' => 1,
                b'\r' => match self.pending.get(index + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A trailing `\r` may be the first half of `\r\n`: wait for more bytes.
                    None => break,
                },
                _ => {
                    index += 1;
                    continue;
                }
            };
            let line = String::from_utf8_lossy(&self.pending[line_start..index]).into_owned();
            if let Some(event) = self.process_line(&line) {
                events.push(event);
            }
            index += terminator_len;
            line_start = index;
        }
        self.pending.drain(..line_start);
        events
    }

    /// Flushes a final event whose terminating blank line never arrived (lenient on EOF).
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.pending.is_empty() {
            let line = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            if let Some(event) = self.process_line(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn process_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_of(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|event| event.data.as_str()).collect()
    }

    const STREAM: &str =
        "data: {\"a\":1}\n\n: keep-alive\n\nevent: note\ndata: x\ndata: y\n\ndata: [DONE]\n\n";

    #[test]
    fn parses_whole_stream_in_one_chunk() {
        let mut parser = SseParser::new();
        let events = parser.feed(STREAM.as_bytes());
        assert_eq!(data_of(&events), ["{\"a\":1}", "x\ny", "[DONE]"]);
        assert_eq!(events[1].event.as_deref(), Some("note"));
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn byte_by_byte_feeding_gives_the_same_events() {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for byte in STREAM.as_bytes() {
            events.extend(parser.feed(std::slice::from_ref(byte)));
        }
        assert_eq!(data_of(&events), ["{\"a\":1}", "x\ny", "[DONE]"]);
    }

    #[test]
    fn crlf_split_between_cr_and_lf_is_one_line_ending() {
        let mut parser = SseParser::new();
        let mut events = parser.feed(b"data: one\r");
        events.extend(parser.feed(b"\n\r"));
        events.extend(parser.feed(b"\ndata: two\r\r"));
        events.extend(parser.feed(b"x"));
        assert_eq!(data_of(&events), ["one", "two"]);
    }

    #[test]
    fn multibyte_utf8_split_across_chunks_survives() {
        let text = "data: héllo ✓\n\n".as_bytes();
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in text.chunks(3) {
            events.extend(parser.feed(piece));
        }
        assert_eq!(data_of(&events), ["héllo ✓"]);
    }

    #[test]
    fn finish_flushes_an_unterminated_event() {
        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: tail").is_empty());
        assert_eq!(parser.finish().map(|event| event.data), Some("tail".into()));
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn data_without_space_and_field_without_colon() {
        let mut parser = SseParser::new();
        let events = parser.feed(b"data:compact\nid\n\n");
        assert_eq!(data_of(&events), ["compact"]);
    }
}
