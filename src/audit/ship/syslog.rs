//! RFC 5424 messages and RFC 5425/6587 octet-counting framing.

/// Our SD-ID: `name@<private enterprise number>` (RFC 5424 §7.2.2); 32473
/// is the number reserved for documentation and examples (RFC 5612).
pub const SD_ID: &str = "jmxgate@32473";

/// Severity notice (5): audit records are normal but significant.
const NOTICE: u8 = 5;

/// What one message carries.
pub struct Message<'a> {
    pub facility: u8,
    /// An RFC 3339 time (the record's), or `None` for now.
    pub time: Option<&'a str>,
    pub replica: &'a str,
    pub seq: u64,
    pub hash: &'a str,
    /// The sealed JSON line, without its newline.
    pub line: &'a [u8],
}

/// Escapes an SD-PARAM value: `"`, `\` and `]` get a backslash (§6.3.3).
pub fn escape_param(value: &str, out: &mut Vec<u8>) {
    for b in value.bytes() {
        if matches!(b, b'"' | b'\\' | b']') {
            out.push(b'\\');
        }
        out.push(b);
    }
}

/// A HOSTNAME field: printable US-ASCII without spaces, at most 255
/// characters, `-` when empty (§6.2.4).
fn hostname(name: &str) -> String {
    let h: String = name
        .chars()
        .take(255)
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect();
    if h.is_empty() {
        "-".into()
    } else {
        h
    }
}

/// A TIMESTAMP: the record's time when it is one RFC 5424 accepts (at most
/// six fraction digits), else now.
fn timestamp(time: Option<&str>) -> String {
    let valid = |t: &str| {
        humantime::parse_rfc3339(t).is_ok()
            && t.split_once('.')
                .is_none_or(|(_, frac)| frac.trim_end_matches('Z').len() <= 6)
    };
    match time {
        Some(t) if valid(t) => t.to_string(),
        _ => humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
    }
}

/// `<PRI>1 TIMESTAMP HOSTNAME jmxgate - audit [SD] LINE`.
pub fn format(m: &Message<'_>, out: &mut Vec<u8>) {
    let pri = u16::from(m.facility) * 8 + u16::from(NOTICE);
    out.extend_from_slice(
        format!(
            "<{pri}>1 {} {} jmxgate - audit [{SD_ID} replica=\"",
            timestamp(m.time),
            hostname(m.replica)
        )
        .as_bytes(),
    );
    escape_param(m.replica, out);
    out.extend_from_slice(format!("\" seq=\"{}\" hash=\"", m.seq).as_bytes());
    escape_param(m.hash, out);
    out.extend_from_slice(b"\"] ");
    out.extend_from_slice(m.line);
}

/// Appends `message` with octet-counting framing: `<length> <message>`.
pub fn frame(message: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(message.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(m: &Message<'_>) -> String {
        let mut out = Vec::new();
        format(m, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_record_becomes_one_rfc5424_message() {
        let line = br#"{"seq":7,"time":"2026-01-02T03:04:05.678Z","event":"item","prev":"00","hash":"ab"}"#;
        let m = Message {
            facility: 16,
            time: Some("2026-01-02T03:04:05.678Z"),
            replica: "gw-1",
            seq: 7,
            hash: "ab",
            line,
        };
        assert_eq!(
            text(&m),
            format!(
                "<133>1 2026-01-02T03:04:05.678Z gw-1 jmxgate - audit [jmxgate@32473 replica=\"gw-1\" seq=\"7\" hash=\"ab\"] {}",
                std::str::from_utf8(line).unwrap()
            )
        );
        // auth (4) * 8 + notice (5)
        assert!(text(&Message { facility: 4, ..m }).starts_with("<37>1 "));
    }

    #[test]
    fn sd_values_are_escaped_and_the_hostname_made_printable() {
        let m = Message {
            facility: 16,
            time: Some("not a time"),
            replica: "a \"b\\c]",
            seq: 1,
            hash: "h",
            line: b"{}",
        };
        let t = text(&m);
        assert!(t.contains(r#"a_"b\c] jmxgate"#), "hostname: no spaces: {t}");
        assert!(t.contains(r#"replica="a \"b\\c\]""#), "{t}");
        // An unusable time is replaced by now.
        let stamp = t.split(' ').nth(1).unwrap();
        assert!(humantime::parse_rfc3339(stamp).is_ok(), "{stamp}");
        let empty = text(&Message { replica: "", ..m });
        assert!(empty.contains(" - jmxgate - audit "), "{empty}");
    }

    #[test]
    fn octet_counting_counts_bytes_not_characters() {
        let mut out = Vec::new();
        frame("é1".as_bytes(), &mut out);
        frame(b"ab", &mut out);
        assert_eq!(out, "3 é12 ab".as_bytes());
    }
}
