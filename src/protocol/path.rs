//! Jolokia's path escaping, shared by the GET URL grammar and the inner
//! `path` of read, write and list: segments split on `/`, `!x` stands for a
//! literal `x` (so `!/` is a slash inside a segment and `!!` a `!`), and a
//! segment that is exactly `*` is a wildcard.

/// One path segment; `None` is the wildcard `*`.
pub type Segment = Option<String>;

/// Splits `a/b!/c/` into `["a", "b/c"]` the way Jolokia's `EscapeUtil`
/// does: an empty middle segment is kept, one trailing `/` is dropped, and
/// a lone `!` at the end stays literal.
pub fn split(path: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    let mut ended_on_slash = false;
    while let Some(c) = chars.next() {
        ended_on_slash = false;
        match c {
            '!' => match chars.next() {
                Some(escaped) => current.push(escaped),
                None => current.push('!'),
            },
            '/' => {
                parts.push(std::mem::take(&mut current));
                ended_on_slash = true;
            }
            other => current.push(other),
        }
    }
    if !ended_on_slash {
        parts.push(current);
    }
    parts
}

/// [`split`], with `*` segments turned into wildcards.
pub fn split_segments(path: &str) -> Vec<Segment> {
    split(path)
        .into_iter()
        .map(|s| if s == "*" { None } else { Some(s) })
        .collect()
}

/// Escapes one segment so that [`split`] gives it back unchanged.
pub fn escape_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for c in segment.chars() {
        if c == '!' || c == '/' {
            out.push('!');
        }
        out.push(c);
    }
    // A literal "*" segment can't be written: Jolokia reads `!*` as a
    // wildcard too, so the wildcard meaning is the only one there is.
    out
}

/// Joins segments into an inner path string (`None` becomes `*`).
pub fn join(segments: &[Segment]) -> String {
    segments
        .iter()
        .map(|s| s.as_deref().map_or_else(|| "*".to_string(), escape_segment))
        .collect::<Vec<_>>()
        .join("/")
}

/// Splits a comma-separated attribute list where `\,` is a literal comma.
pub fn split_csv(list: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = list.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) => parts.last_mut().expect("never empty").push(e),
                None => parts.last_mut().expect("never empty").push('\\'),
            },
            ',' => parts.push(String::new()),
            other => parts.last_mut().expect("never empty").push(other),
        }
    }
    if parts.last().is_some_and(String::is_empty) && parts.len() > 1 {
        parts.pop();
    }
    parts
}

/// The GET spellings of special values: `[null]` is null and `""` the
/// empty string; anything else is the string itself.
pub fn value_from_get(segment: Segment) -> super::JsonText {
    match segment.as_deref() {
        None | Some("[null]") => super::JsonText::null(),
        Some("\"\"") => super::JsonText::string(""),
        Some(s) => super::JsonText::string(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_jolokia_escape_util() {
        let cases: &[(&str, &[&str])] = &[
            ("a//b", &["a", "", "b"]),
            ("a/b/", &["a", "b"]),
            ("a/b//", &["a", "b", ""]),
            ("/a", &["", "a"]),
            ("a!/b/c", &["a/b", "c"]),
            ("a!!/b", &["a!", "b"]),
            ("a!!!/b", &["a!/b"]),
            ("a!\"b", &["a\"b"]),
            ("a!xb", &["axb"]),
            ("a!", &["a!"]),
            ("x!//y", &["x/", "y"]),
            ("a!/!/b", &["a//b"]),
        ];
        for (input, want) in cases {
            assert_eq!(split(input), *want, "{input}");
        }
    }

    #[test]
    fn wildcards_and_round_trips() {
        assert_eq!(split_segments("a/*/!*"), vec![Some("a".into()), None, None]);
        for segs in [
            vec![Some("a/b".to_string()), Some("c!d".into())],
            vec![Some("x".into()), None, Some("".into()), Some("y".into())],
        ] {
            assert_eq!(split_segments(&join(&segs)), segs);
        }
    }

    #[test]
    fn csv_attribute_lists() {
        assert_eq!(split_csv("A,B\\,C"), vec!["A", "B,C"]);
        assert_eq!(split_csv("A,,B,"), vec!["A", "", "B"]);
        assert_eq!(split_csv("One"), vec!["One"]);
    }

    #[test]
    fn special_value_tags() {
        let text = |s: Option<&str>| value_from_get(s.map(str::to_string)).as_str().to_string();
        assert_eq!(text(Some("[null]")), "null");
        assert_eq!(text(Some("\"\"")), "\"\"");
        assert_eq!(text(Some("12")), "\"12\"");
        assert_eq!(text(None), "null");
    }
}
