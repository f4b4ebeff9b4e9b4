//! What is said about a receiver's answer (pure). `/readyz` is open to
//! anyone who reaches the admin listener, so it is told only how a
//! request ended (`the receiver answered HTTP 401`, `could not connect`);
//! the receiver's own words go to the log alone, their start only, with
//! every value the export sends that may be a credential masked wherever
//! it appears: an error page may echo the request's headers.

use base64::Engine as _;

use crate::secret::Secret;

/// Characters of a receiver's words kept for the log.
pub(crate) const REASON_CHARS: usize = 200;
/// What a masked value becomes.
const MASK: &str = "***";
/// Characters a query value has at least to be masked: a token's length;
/// shorter ones (a tenant, a region) are not credentials, and masking a
/// letter would leave nothing of the words to read.
const MIN_QUERY_VALUE: usize = 8;

/// The values the log never shows of an export's requests, in every form
/// a receiver may echo them in; longest first, so that a value holding
/// another is masked whole.
pub(crate) struct Masks(Vec<Secret>);

impl Masks {
    /// For an export sending these header values to `url`: its user and
    /// password go as Basic credentials (reqwest sends them so), its
    /// longer query values may be tokens.
    pub(crate) fn new<'a>(
        header_values: impl IntoIterator<Item = &'a str>,
        url: &url::Url,
    ) -> Masks {
        let mut values: Vec<String> = Vec::new();
        for value in header_values {
            values.extend(credential_forms(value));
        }
        let decoded = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        if let Some(password) = url.password() {
            let (user, plain) = (decoded(url.username()), decoded(password));
            values.extend(credential_forms(&format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{plain}"))
            )));
            values.push(password.to_string());
        }
        if let Some(query) = url.query() {
            for pair in query.split('&') {
                let raw = pair.split_once('=').map_or("", |(_, v)| v);
                let value = decoded(&raw.replace('+', " "));
                if value.chars().count() >= MIN_QUERY_VALUE {
                    values.push(raw.to_string());
                    values.push(value);
                }
            }
        }
        // As a JSON string writes it, and as the log's one line does.
        let escaped: Vec<String> = values
            .iter()
            .flat_map(|v| {
                let json = serde_json::to_string(v).expect("a string is JSON");
                [json[1..json.len() - 1].to_string(), one_line(v)]
            })
            .collect();
        values.extend(escaped);
        values.retain(|v| !v.is_empty());
        values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        values.dedup();
        Masks(values.into_iter().map(Secret::new).collect())
    }

    /// Bytes of the longest value.
    pub(crate) fn longest(&self) -> usize {
        self.0.first().map_or(0, |v| v.expose().len())
    }

    /// Bytes of an answer to read for [`excerpt`]: enough that a value
    /// starting within the characters kept is there whole.
    pub(crate) fn bytes_to_read(&self) -> usize {
        4 * REASON_CHARS + self.longest()
    }

    /// The value that starts `text`, if any.
    fn at_start(&self, text: &[u8]) -> Option<usize> {
        self.0
            .iter()
            .map(|v| v.expose().as_bytes())
            .find(|v| text.starts_with(v))
            .map(<[u8]>::len)
    }

    /// `text` with every value masked, up to `until` (bytes): a value
    /// starting before it is masked whole, nothing starting after it is
    /// kept.
    fn masked(&self, text: &[u8], until: usize) -> String {
        let mut out = Vec::with_capacity(until);
        let mut at = 0;
        while at < until {
            match self.at_start(&text[at..]) {
                Some(len) => {
                    out.extend_from_slice(MASK.as_bytes());
                    at += len;
                }
                None => {
                    out.push(text[at]);
                    at += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// A header value and the credentials in it: after an auth scheme
/// (`Bearer <token>`: the token), and a Basic one decoded (`user:password`
/// and the password).
fn credential_forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    let Some((scheme, rest)) = value.trim().split_once(char::is_whitespace) else {
        return forms;
    };
    let rest = rest.trim();
    if !scheme
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return forms;
    }
    forms.push(rest.to_string());
    if scheme.eq_ignore_ascii_case("basic") {
        if let Some(pair) = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
        {
            if let Some((_, password)) = pair.split_once(':') {
                forms.push(password.to_string());
            }
            forms.push(pair);
        }
    }
    forms
}

/// The start of a receiver's words for the log: the export's values
/// masked, on one line (an OTLP `Status` in protobuf shows its message's
/// printable bytes), at most [`REASON_CHARS`] characters. `cut`: the
/// words went on past `raw`, so a value at its end may be there in part;
/// the bytes where one could be are dropped.
pub(crate) fn excerpt(raw: &[u8], cut: bool, masks: &Masks) -> String {
    let until = if cut {
        raw.len().saturating_sub(masks.longest())
    } else {
        raw.len()
    };
    let line = one_line(&masks.masked(raw, until));
    // A value whose spaces the line changed is there in its line form.
    let line = masks.masked(line.as_bytes(), line.len());
    let mut kept: String = line.chars().take(REASON_CHARS).collect();
    if line.chars().nth(REASON_CHARS).is_some() {
        kept.push('…');
    }
    if kept.is_empty() {
        "no reason given".into()
    } else {
        kept
    }
}

/// Text on one line: control characters as spaces, runs of space as one.
fn one_line(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Points, with the word: `1 point`, `7 points`.
pub(crate) fn points(n: u64) -> String {
    if n == 1 {
        "1 point".into()
    } else {
        format!("{n} points")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masks(headers: &[&str], url: &str) -> Masks {
        Masks::new(headers.iter().copied(), &url::Url::parse(url).unwrap())
    }

    #[test]
    fn an_echoed_header_value_or_credential_is_masked_wherever_it_is() {
        let basic = base64::engine::general_purpose::STANDARD.encode("ops:pa ss");
        let m = masks(
            &["Bearer tok-123", "team-a", &format!("Basic {basic}")],
            "https://u:se%2Fcret@h/otlp?api_key=k3y%2B1-token&tenant=a",
        );
        let said = format!(
            "bad request\r\nauthorization: Bearer tok-123\r\nx-team: team-a\r\n\
             token tok-123 again; basic {basic} = ops:pa ss; url ?api_key=k3y%2B1-token (k3y+1-token); \
             user u:se/cret; {{\"auth\":\"Bearer tok-123\"}}"
        );
        let out = excerpt(said.as_bytes(), false, &m);
        for secret in [
            "tok-123",
            "team-a",
            &basic,
            "pa ss",
            "k3y",
            "se/cret",
            "se%2Fcret",
        ] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(
            out.starts_with("bad request authorization: *** x-team: *** token *** again"),
            "{out}"
        );
        // A short query value is no token: the words stay readable.
        let m = masks(&[], "http://h/otlp?tenant=a&region=eu-1");
        assert_eq!(excerpt(b"bad tenant a", false, &m), "bad tenant a");
    }

    #[test]
    fn a_value_cut_off_where_the_read_stopped_is_not_shown_in_part() {
        let m = masks(&["Bearer 0123456789abcdef"], "http://h");
        // What was read ends inside the token.
        let read = b"denied for Bearer 0123456789ab";
        let out = excerpt(read, true, &m);
        assert!(!out.contains("0123"), "{out}");
        assert!(out.starts_with("denied"), "{out}");
        // A whole value just before the end is masked, not cut.
        let read = b"denied for Bearer 0123456789abcdef and so on and so on";
        let out = excerpt(read, true, &m);
        assert!(out.starts_with("denied for ***"), "{out}");
        // A value whose whitespace the one line changes.
        let m = masks(&["two  spaces\tand tab"], "http://h");
        let out = excerpt(b"got two  spaces\tand tab", false, &m);
        assert_eq!(out, "got ***");
    }

    #[test]
    fn the_excerpt_is_one_short_line() {
        let m = masks(&[], "http://h");
        let long = "x".repeat(5000);
        let out = excerpt(long.as_bytes(), true, &m);
        assert_eq!(out.chars().count(), REASON_CHARS + 1, "{out}");
        assert_eq!(excerpt(b" \r\n\t", false, &m), "no reason given");
        assert_eq!(excerpt(b"a\n\n b\x00c", false, &m), "a b c");
        assert!(m.bytes_to_read() >= 4 * REASON_CHARS);
        assert_eq!(points(1), "1 point");
        assert_eq!(points(0), "0 points");
    }
}
