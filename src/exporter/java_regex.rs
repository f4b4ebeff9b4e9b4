//! `java.util.regex` patterns and replacement strings, as jmx_exporter's
//! rules files are written against them, on top of `fancy-regex` (which
//! brings the backtracking features Java has and the `regex` crate lacks:
//! lookahead, lookbehind, atomic groups, possessive quantifiers,
//! backreferences).
//!
//! Where Java and Rust read the same pattern differently, the pattern is
//! rewritten first: `\w`, `\d`, `\s` (and their negations) are ASCII in
//! Java, Unicode in Rust; `\h` and `\v` are horizontal and vertical white
//! space in Java; `\p{Alpha}`-style names are Java's POSIX (ASCII) classes;
//! `\Q…\E` quotes; `\uhhhh`, `\0ooo` and `\cX` are spelled differently.
//!
//! Replacements follow `Matcher.appendReplacement`: `$n` takes as many
//! digits as still name an existing group (so `$12` with one group is `$1`
//! then `2`), `${name}` a named group, `\x` the character `x`; a group
//! that did not take part gives nothing.

use std::fmt::Write as _;

/// A compiled pattern with Java's semantics.
#[derive(Debug, Clone)]
pub struct JavaRegex {
    regex: fancy_regex::Regex,
    /// The pattern as written, for messages.
    source: String,
}

impl JavaRegex {
    /// Compiles a Java pattern. The error names the pattern and the cause.
    pub fn new(pattern: &str) -> Result<JavaRegex, String> {
        let translated = translate(pattern)?;
        let regex = fancy_regex::RegexBuilder::new(&translated)
            .backtrack_limit(1_000_000)
            .build()
            .map_err(|e| {
                let mut why = e.to_string();
                // A position in the rewritten pattern would mislead.
                if translated != pattern {
                    if let Some(at) = why.find(" at position ") {
                        let end = why[at + 13..]
                            .find(|c: char| !c.is_ascii_digit())
                            .map_or(why.len(), |e| at + 13 + e);
                        why.replace_range(at..end, "");
                    }
                }
                format!("pattern {pattern:?} does not compile: {why}")
            })?;
        Ok(JavaRegex {
            regex,
            source: pattern.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Capturing groups, not counting the whole match.
    pub fn groups(&self) -> usize {
        self.regex.captures_len() - 1
    }

    /// The groups' names, by number.
    fn group_names(&self) -> Vec<Option<String>> {
        self.regex
            .capture_names()
            .map(|n| n.map(str::to_string))
            .collect()
    }

    /// Whether the pattern matches somewhere in `text`; `None` when it
    /// backtracked too much to say.
    pub fn is_match(&self, text: &str) -> Option<bool> {
        self.regex.is_match(text).ok()
    }

    /// The captures of a match of the whole `text`, or `None`. A pattern
    /// that backtracks too much for a text counts as no match.
    pub fn captures<'t>(&self, text: &'t str) -> Option<Captures<'t>> {
        let caps = self.regex.captures(text).ok()??;
        let groups = (0..self.regex.captures_len())
            .map(|i| caps.get(i).map(|m| m.as_str()))
            .collect();
        Some(Captures { groups })
    }

    /// A replacement string for this pattern, checked now: a reference to
    /// a group it doesn't have fails the rules file, not a scrape.
    pub fn replacement(&self, text: &str) -> Result<Replacement, String> {
        Replacement::parse(text, self.groups(), &self.group_names())
            .map_err(|e| format!("{e} in {text:?} (pattern {:?})", self.source))
    }
}

/// The groups of one match, by number (0: the whole match).
#[derive(Debug)]
pub struct Captures<'t> {
    groups: Vec<Option<&'t str>>,
}

impl Captures<'_> {
    pub fn get(&self, i: usize) -> Option<&str> {
        self.groups.get(i).copied().flatten()
    }
}

/// A parsed Java replacement string.
#[derive(Debug, Clone, PartialEq)]
pub struct Replacement(Vec<Piece>);

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Group(usize),
}

impl Replacement {
    /// Parses `text` as `Matcher.appendReplacement` reads it for a pattern
    /// with `groups` groups named `names`.
    pub fn parse(
        text: &str,
        groups: usize,
        names: &[Option<String>],
    ) -> Result<Replacement, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(next) => literal.push(next),
                    None => return Err("character to be escaped is missing".into()),
                },
                '$' => {
                    let group = match chars.peek() {
                        None => {
                            return Err("illegal group reference: group index is missing".into())
                        }
                        Some('{') => {
                            chars.next();
                            let mut name = String::new();
                            loop {
                                match chars.next() {
                                    Some('}') => break,
                                    Some(c) if c.is_ascii_alphanumeric() => name.push(c),
                                    _ => {
                                        return Err(
                                            "named capturing group is missing trailing '}'".into()
                                        )
                                    }
                                }
                            }
                            names
                                .iter()
                                .position(|n| n.as_deref() == Some(name.as_str()))
                                .ok_or_else(|| format!("no group with name {{{name}}}"))?
                        }
                        Some(d) if d.is_ascii_digit() => {
                            let mut number = d.to_digit(10).unwrap_or(0) as usize;
                            chars.next();
                            if number > groups {
                                return Err(format!("no group {number}"));
                            }
                            // More digits while they still name a group.
                            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                                let longer = number * 10 + d as usize;
                                if longer > groups {
                                    break;
                                }
                                number = longer;
                                chars.next();
                            }
                            number
                        }
                        Some(_) => return Err("illegal group reference".into()),
                    };
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Group(group));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Replacement(pieces))
    }

    /// The replacement for one match.
    pub fn expand(&self, captures: &Captures<'_>) -> String {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Group(g) => out.push_str(captures.get(*g).unwrap_or("")),
            }
        }
        out
    }

    /// Whether it names no group: the same text for every match.
    pub fn is_constant(&self) -> bool {
        self.0.iter().all(|p| matches!(p, Piece::Text(_)))
    }
}

// Java's ASCII classes, as the contents of a character class.
const WORD: &str = "0-9A-Za-z_";
const DIGIT: &str = "0-9";
const SPACE: &str = r"\t\n\x0B\x0C\r ";
const HSPACE: &str = r" \t\x{A0}\x{1680}\x{180E}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}";
const VSPACE: &str = r"\n\x0B\x0C\r\x{85}\x{2028}\x{2029}";

/// Java's POSIX character class names (`\p{Alpha}`), as class contents.
fn posix_class(name: &str) -> Option<&'static str> {
    Some(match name {
        "Lower" => "a-z",
        "Upper" => "A-Z",
        "ASCII" => r"\x00-\x7F",
        "Alpha" => "a-zA-Z",
        "Digit" => "0-9",
        "Alnum" => "a-zA-Z0-9",
        "Punct" => r"!-/:-@\[-`{-~",
        "Graph" => r"!-~",
        "Print" => r" -~",
        "Blank" => r" \t",
        "Cntrl" => r"\x00-\x1F\x7F",
        "XDigit" => "0-9a-fA-F",
        "Space" => r"\t\n\x0B\x0C\r ",
        _ => return None,
    })
}

/// Rewrites a Java pattern into fancy-regex syntax with the same meaning.
fn translate(pattern: &str) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 16);
    let chars: Vec<char> = pattern.chars().collect();
    let mut class_depth = 0usize;
    let mut i = 0;
    // A class's set, or a negated one nested in a class.
    let set =
        |out: &mut String, contents: &str, negated: bool, in_class: bool| match (negated, in_class)
        {
            (false, true) => out.push_str(contents),
            (false, false) => {
                let _ = write!(out, "[{contents}]");
            }
            (true, _) => {
                let _ = write!(out, "[^{contents}]");
            }
        };
    // Java's `.` stops at every line terminator, Rust's only at `\n`;
    // with a DOTALL flag both take everything.
    let dot_all = has_dot_all_flag(pattern);
    while i < chars.len() {
        let c = chars[i];
        let in_class = class_depth > 0;
        match c {
            '.' if !in_class && !dot_all => out.push_str(r"[^\n\r\x{85}\x{2028}\x{2029}]"),
            '\\' => {
                let Some(&e) = chars.get(i + 1) else {
                    return Err(format!(
                        "pattern {pattern:?} ends with an unfinished escape"
                    ));
                };
                i += 2;
                match e {
                    'w' => set(&mut out, WORD, false, in_class),
                    'W' => set(&mut out, WORD, true, in_class),
                    'd' => set(&mut out, DIGIT, false, in_class),
                    'D' => set(&mut out, DIGIT, true, in_class),
                    's' => set(&mut out, SPACE, false, in_class),
                    'S' => set(&mut out, SPACE, true, in_class),
                    'h' => set(&mut out, HSPACE, false, in_class),
                    'H' => set(&mut out, HSPACE, true, in_class),
                    'v' => set(&mut out, VSPACE, false, in_class),
                    'V' => set(&mut out, VSPACE, true, in_class),
                    'p' | 'P' if chars.get(i) == Some(&'{') => {
                        let end = chars[i..]
                            .iter()
                            .position(|&c| c == '}')
                            .map(|p| i + p)
                            .ok_or_else(|| format!("pattern {pattern:?}: unclosed \\p{{"))?;
                        let name: String = chars[i + 1..end].iter().collect();
                        let bare = name.strip_prefix("Is").unwrap_or(&name);
                        match posix_class(bare) {
                            Some(contents) => set(&mut out, contents, e == 'P', in_class),
                            None => {
                                let _ = write!(out, "\\{e}{{{name}}}");
                            }
                        }
                        i = end + 1;
                    }
                    'Q' => {
                        // Literal up to \E (or the end).
                        while i < chars.len() {
                            if chars[i] == '\\' && chars.get(i + 1) == Some(&'E') {
                                i += 2;
                                break;
                            }
                            push_literal(&mut out, chars[i]);
                            i += 1;
                        }
                    }
                    'E' => {}
                    'u' => {
                        let hex: String = chars.get(i..i + 4).unwrap_or(&[]).iter().collect();
                        if hex.len() != 4 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                            return Err(format!("pattern {pattern:?}: \\u needs four hex digits"));
                        }
                        let _ = write!(out, "\\x{{{hex}}}");
                        i += 4;
                    }
                    '0' => {
                        // Java: \0 then one to three octal digits (max \0377).
                        let mut value = 0u32;
                        let mut digits = 0;
                        while digits < 3 {
                            match chars.get(i).and_then(|c| c.to_digit(8)) {
                                Some(d) if value * 8 + d <= 0o377 => {
                                    value = value * 8 + d;
                                    i += 1;
                                    digits += 1;
                                }
                                _ => break,
                            }
                        }
                        if digits == 0 {
                            return Err(format!("pattern {pattern:?}: illegal octal escape"));
                        }
                        let _ = write!(out, "\\x{{{value:X}}}");
                    }
                    'c' => {
                        let Some(&x) = chars.get(i) else {
                            return Err(format!("pattern {pattern:?}: \\c needs a character"));
                        };
                        let _ = write!(out, "\\x{{{:X}}}", (x as u32) ^ 64);
                        i += 1;
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
                continue;
            }
            '[' => {
                class_depth += 1;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                continue;
            }
            ']' if in_class => {
                class_depth -= 1;
                out.push(']');
            }
            _ => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

/// Whether an inline flag group (`(?s)`, `(?is:…)`) turns DOTALL on.
fn has_dot_all_flag(pattern: &str) -> bool {
    pattern.match_indices("(?").any(|(at, _)| {
        pattern[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .any(|c| c == 's')
    })
}

/// One character, escaped where the regex syntax gives it a meaning.
fn push_literal(out: &mut String, c: char) {
    if regex_syntax_meta(c) {
        out.push('\\');
    }
    out.push(c);
}

fn regex_syntax_meta(c: char) -> bool {
    matches!(
        c,
        '\\' | '.'
            | '+'
            | '*'
            | '?'
            | '('
            | ')'
            | '|'
            | '['
            | ']'
            | '{'
            | '}'
            | '^'
            | '$'
            | '#'
            | '&'
            | '-'
            | '~'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(pattern: &str) -> JavaRegex {
        JavaRegex::new(&format!("^.*(?:{pattern}).*$")).unwrap()
    }

    #[test]
    fn shorthand_classes_are_ascii_as_in_java() {
        let re = whole(r"^a\w+b$");
        assert!(re.captures("a_x9b").is_some());
        assert!(re.captures("aéb").is_none(), "\\w is ASCII in Java");
        assert!(
            whole(r"^\d$").captures("٣").is_none(),
            "\\d is ASCII in Java"
        );
        assert!(whole(r"^[\w.]+$").captures("a.b_c").is_some());
        assert!(whole(r"^[\w.]+$").captures("a-b").is_none());
        assert!(whole(r"^\S+$").captures("ab c").is_none());
        assert!(
            whole(r"^[^\s]+$").captures("ab\u{00A0}c").is_some(),
            "NBSP is no \\s in Java"
        );
        assert!(whole(r"^[x\W]+$").captures("x-x").is_some());
        assert!(whole(r"^\p{Alpha}+$").captures("abcZ").is_some());
        assert!(whole(r"^\p{Alpha}+$").captures("abcé").is_none());
        assert!(
            whole(r"^\p{L}+$").captures("abcé").is_some(),
            "Unicode categories stay"
        );
    }

    #[test]
    fn java_only_syntax_is_spelled_for_rust() {
        assert!(whole(r"^\Qa.b*\E$").captures("a.b*").is_some());
        assert!(whole(r"^\Qa.b*\E$").captures("axbb").is_none());
        assert!(whole(r"^\u0041$").captures("A").is_some());
        assert!(whole(r"^\0101$").captures("A").is_some());
        assert!(whole(r"^a\h+b$").captures("a \tb").is_some());
        assert!(whole(r"^a\h+b$").captures("a\nb").is_none());
        // `.` stops at every line terminator, as Java's does, unless DOTALL.
        for stop in ["\n", "\r", "\u{85}", "\u{2028}", "\u{2029}"] {
            assert!(
                whole("^a.b$").captures(&format!("a{stop}b")).is_none(),
                "{stop:?}"
            );
            assert!(
                whole("(?s)^a.b$").captures(&format!("a{stop}b")).is_some(),
                "{stop:?}"
            );
        }
        assert!(whole("^a[.]b$").captures("a.b").is_some());
        assert!(whole("^a[.]b$").captures("axb").is_none());
    }

    #[test]
    fn lookahead_possessive_and_atomic_groups_work() {
        // From cassandra.yml: a key other than `scope`.
        let re = whole(
            r"org.apache.cassandra.metrics<type=(\S*)(?:, ((?!scope)\S*)=(\S*))?(?:, scope=(\S*))?, name=(\S*)><>Value",
        );
        let c = re
            .captures("org.apache.cassandra.metrics<type=Table, keyspace=ks, scope=t1, name=Reads><>Value: 5")
            .unwrap();
        assert_eq!(
            [c.get(1), c.get(2), c.get(3), c.get(4), c.get(5)],
            [
                Some("Table"),
                Some("keyspace"),
                Some("ks"),
                Some("t1"),
                Some("Reads")
            ]
        );
        let c = re
            .captures("org.apache.cassandra.metrics<type=Table, scope=t1, name=Reads><>Value: 5")
            .unwrap();
        assert_eq!((c.get(2), c.get(4)), (None, Some("t1")));
        assert!(whole(r"^a++b$").captures("aab").is_some());
        assert!(whole(r"^(?>a|ab)c$").captures("abc").is_none());
    }

    #[test]
    fn tomcats_character_ranges_compile() {
        let re = whole(
            r"Catalina<type=Manager, host=([-a-zA-Z0-9+&@#/%?=~_|!:.,;]*[-a-zA-Z0-9+&@#/%=~_|]), context=([-a-zA-Z0-9+/$%~_-|!.]*)><>(processingTime|sessionCounter):",
        );
        let c = re
            .captures("Catalina<type=Manager, host=localhost, context=/app><>sessionCounter: 3")
            .unwrap();
        assert_eq!(
            (c.get(1), c.get(2), c.get(3)),
            (Some("localhost"), Some("/app"), Some("sessionCounter"))
        );
    }

    #[test]
    fn replacements_follow_javas_group_references() {
        let re = whole("(a)(b)?");
        let c = re.captures("xa").unwrap();
        let r = |t: &str| re.replacement(t).map(|r| r.expand(&c));
        assert_eq!(r("$1").unwrap(), "a");
        assert_eq!(r("$12").unwrap(), "a2", "two groups: $12 is $1, then '2'");
        assert_eq!(
            r("x_$2_y").unwrap(),
            "x__y",
            "a group that took no part gives nothing"
        );
        assert_eq!(r(r"\$1 costs \\1").unwrap(), r"$1 costs \1");
        assert!(r("$3").unwrap_err().contains("no group 3"));
        assert!(r("end$").unwrap_err().contains("group index is missing"));
        let one = whole("(a)");
        let c1 = one.captures("a").unwrap();
        assert_eq!(one.replacement("$12").unwrap().expand(&c1), "a2");
        assert_eq!(one.replacement("$10_x").unwrap().expand(&c1), "a0_x");
        let named = whole("(?<word>a)");
        let cn = named.captures("a").unwrap();
        assert_eq!(named.replacement("<${word}>").unwrap().expand(&cn), "<a>");
        assert!(named.replacement("${other}").is_err());
        assert!(one.replacement("plain").unwrap().is_constant());
    }
}
