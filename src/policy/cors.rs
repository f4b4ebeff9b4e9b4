//! `<cors>`: Jolokia's `CorsChecker`. Each `<allow-origin>` is lower-cased
//! and becomes an anchored pattern where `*` is Java's `.*` (any run of
//! characters but line terminators) and everything else is literal; the
//! origin itself is not lower-cased.

/// Java's `.` does not match these (no DOTALL).
pub(crate) fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// An anchored glob with `*` as the only wildcard.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    /// The literal pieces between the stars (at least two).
    pieces: Vec<String>,
}

impl Glob {
    /// `None` when `pattern` has no `*` (then it is a literal).
    pub fn new(pattern: &str) -> Option<Glob> {
        pattern.contains('*').then(|| Glob {
            pieces: pattern.split('*').map(str::to_string).collect(),
        })
    }

    /// Whether `s` matches; `star_crosses_lines` says whether `*` may
    /// cover line terminators.
    pub fn matches(&self, s: &str, star_crosses_lines: bool) -> bool {
        if star_crosses_lines || !s.contains(is_line_terminator) {
            return self.matches_any(s);
        }
        // Rare: line terminators must all fall inside literal pieces.
        self.matches_from(0, s, true)
    }

    /// `*` matches anything: first and last pieces anchor, the middle ones
    /// are found left to right.
    fn matches_any(&self, s: &str) -> bool {
        let (first, last) = (&self.pieces[0], &self.pieces[self.pieces.len() - 1]);
        if s.len() < first.len() + last.len() || !s.starts_with(first.as_str()) {
            return false;
        }
        if !s.ends_with(last.as_str()) {
            return false;
        }
        let mut rest = &s[first.len()..s.len() - last.len()];
        for piece in &self.pieces[1..self.pieces.len() - 1] {
            match rest.find(piece.as_str()) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        true
    }

    /// Backtracking match of pieces[i..] against s, where the text a star
    /// covers may not hold a line terminator.
    fn matches_from(&self, i: usize, s: &str, anchored: bool) -> bool {
        let piece = &self.pieces[i];
        let last = i == self.pieces.len() - 1;
        let mut start = 0;
        loop {
            let gap = &s[..start];
            if gap.contains(is_line_terminator) {
                return false;
            }
            if s[start..].starts_with(piece.as_str()) {
                let after = &s[start + piece.len()..];
                if last {
                    if after.is_empty() {
                        return true;
                    }
                } else if self.matches_from(i + 1, after, false) {
                    return true;
                }
            }
            if anchored {
                return false;
            }
            match s[start..].chars().next() {
                Some(c) => start += c.len_utf8(),
                None => return false,
            }
        }
    }
}

#[derive(Debug, Clone)]
enum OriginPattern {
    Literal(String),
    Glob(Glob),
}

/// A compiled `<cors>` configuration (all `<cors>` elements merged).
#[derive(Debug, Clone, Default)]
pub(crate) struct Cors {
    /// `None` without any `<cors>` element.
    patterns: Option<Vec<OriginPattern>>,
    strict_checking: bool,
    ignore_scheme: bool,
}

impl Cors {
    /// Notes that a `<cors>` element exists (even an empty one).
    pub fn section_present(&mut self) {
        self.patterns.get_or_insert_with(Vec::new);
    }

    pub fn add_allow_origin(&mut self, text: &str) {
        let p = super::xml::java_trim(text).to_lowercase();
        let pattern = match Glob::new(&p) {
            Some(g) => OriginPattern::Glob(g),
            None => OriginPattern::Literal(p),
        };
        self.patterns.get_or_insert_with(Vec::new).push(pattern);
    }

    pub fn set_strict_checking(&mut self) {
        self.strict_checking = true;
    }

    pub fn set_ignore_scheme(&mut self) {
        self.ignore_scheme = true;
    }

    pub fn ignore_scheme(&self) -> bool {
        self.ignore_scheme
    }

    /// Whether an `<allow-origin>` names `origin` (not the default of a
    /// policy without `<cors>`, which admits every origin).
    pub fn lists(&self, origin: &str) -> bool {
        self.patterns.as_ref().is_some_and(|patterns| {
            patterns.iter().any(|p| match p {
                OriginPattern::Literal(l) => l == origin,
                OriginPattern::Glob(g) => g.matches(origin, false),
            })
        })
    }

    /// `CorsChecker.check(origin, onlyWhenStrictCheckingIsEnabled)`.
    pub fn check(&self, origin: Option<&str>, only_if_strict: bool) -> bool {
        if only_if_strict && !self.strict_checking {
            return true;
        }
        let Some(origin) = origin else {
            return !self.strict_checking;
        };
        match &self.patterns {
            None => true,
            Some(patterns) if patterns.is_empty() => true,
            Some(_) => self.lists(origin),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_are_anchored_and_literal() {
        let g = Glob::new("*://*.consol.de").unwrap();
        assert!(g.matches("https://www.consol.de", false));
        assert!(!g.matches("https://consol.de", false));
        assert!(!g.matches("https://www.consol.de.evil", false));
        let g = Glob::new("a.c*").unwrap();
        assert!(g.matches("a.cd", true));
        assert!(!g.matches("abcd", true));
        let g = Glob::new("ab*ba").unwrap();
        assert!(!g.matches("aba", true));
        assert!(g.matches("abba", true));
        let g = Glob::new("*").unwrap();
        assert!(g.matches("", true));
        assert!(g.matches("x\ny", true));
        assert!(!g.matches("x\ny", false));
        let g = Glob::new("x*\n*y").unwrap();
        assert!(g.matches("xa\nby", false));
        assert!(!g.matches("xa\nb\ny", false));
        assert!(Glob::new("plain").is_none());
    }

    #[test]
    fn strict_checking_and_null_origins() {
        let mut c = Cors::default();
        c.section_present();
        c.set_strict_checking();
        assert!(!c.check(None, true));
        assert!(c.check(Some("http://anything"), true));
        c.add_allow_origin(" HTTP://Bla.com ");
        assert!(c.check(Some("http://bla.com"), true));
        assert!(!c.check(Some("HTTP://BLA.COM"), false));
        let none = Cors::default();
        assert!(none.check(None, false) && none.check(None, true));
    }
}
