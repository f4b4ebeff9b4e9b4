//! `<allow>` (alias `<mbeans>`) and `<deny>`: Jolokia's `MBeanAccessChecker`
//! and `MBeanPolicyConfig`, precompiled.
//!
//! Lookup is Jolokia's: the entry whose `<name>` equals the MBean
//! (canonical name, a hash lookup) wins outright, even when it lists
//! nothing for the access asked; otherwise the `<name>` patterns that
//! match it (`ObjectName.apply`). Within the entry, the value matches when
//! it is listed literally, or matches a `*` value (an anchored glob here,
//! see [`super::STRICTER`]).

use std::collections::{HashMap, HashSet};

use super::cors::Glob;
use crate::protocol::ObjectName;

/// Which value set of an entry a check consults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    Exec,
}

impl Access {
    pub fn command(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Exec => "exec",
        }
    }

    pub fn tag(self) -> &'static str {
        match self {
            Access::Read | Access::Write => "<attribute>",
            Access::Exec => "<operation>",
        }
    }

    /// `attribute Foo`, `attribute Foo (write)`, `operation gc`.
    pub fn describe(self, value: &str) -> String {
        match self {
            Access::Read => format!("attribute {value}"),
            Access::Write => format!("attribute {value} (write)"),
            Access::Exec => format!("operation {value}"),
        }
    }
}

/// Regex metacharacters other than `.` and `*`: a `*` value holding one of
/// these is a regex (or an error) to Jolokia, which the gateway does not
/// evaluate.
fn regex_like(value: &str) -> bool {
    value.contains(['\\', '^', '$', '|', '?', '+', '(', ')', '[', ']', '{', '}'])
}

/// A `*` value.
#[derive(Debug, Clone)]
struct Wildcard {
    written: String,
    /// `*` any run, everything else literal.
    glob: Glob,
    /// For `<deny>` only: Jolokia's reading, where `.` is any character
    /// (written with `?` for `wildmatch`); `None` without a `.`.
    dotted: Option<String>,
}

impl Wildcard {
    fn matches(&self, value: &str, deny: bool) -> bool {
        if deny {
            self.glob.matches(value, true)
                || self
                    .dotted
                    .as_deref()
                    .is_some_and(|d| crate::protocol::object_name::wildmatch(value, d))
        } else {
            // Never wider than Jolokia's `.*`, which stops at line ends.
            self.glob.matches(value, false)
        }
    }

    fn matches_everything(&self) -> bool {
        self.written.chars().all(|c| c == '*')
    }
}

/// The attributes (or operations) an entry lists for one access.
#[derive(Debug, Clone, Default)]
pub(crate) struct Values {
    exact: HashSet<String>,
    wildcards: Vec<Wildcard>,
    /// `*` values with other regex metacharacters, as written.
    regexes: Vec<String>,
}

/// How a value matched.
pub(crate) enum Hit<'a> {
    Listed(&'a str),
    Wildcard(&'a str),
    /// `<deny>` only: a regex-like value denies everything.
    Regex(&'a str),
}

impl Values {
    fn add(&mut self, value: &str) {
        self.exact.insert(value.to_string());
        if !value.contains('*') {
            return;
        }
        if regex_like(value) {
            self.regexes.push(value.to_string());
            return;
        }
        if let Some(glob) = Glob::new(value) {
            self.wildcards.push(Wildcard {
                written: value.to_string(),
                glob,
                dotted: value.contains('.').then(|| value.replace('.', "?")),
            });
        }
    }

    pub fn matches<'a>(&'a self, value: &'a str, deny: bool) -> Option<Hit<'a>> {
        if let Some(v) = self.exact.get(value) {
            return Some(Hit::Listed(v));
        }
        if deny {
            if let Some(r) = self.regexes.first() {
                return Some(Hit::Regex(r));
            }
        } else if !self.regexes.is_empty() {
            // Jolokia may fail on the regex before reaching any wildcard.
            return None;
        }
        self.wildcards
            .iter()
            .find(|w| w.matches(value, deny))
            .map(|w| Hit::Wildcard(&w.written))
    }

    /// `<allow>`: could some value be allowed?
    pub fn could_allow(&self) -> bool {
        !self.exact.is_empty()
    }

    /// `<deny>`: is every value denied?
    pub fn denies_everything(&self) -> bool {
        !self.regexes.is_empty() || self.wildcards.iter().any(Wildcard::matches_everything)
    }

    pub fn regexes(&self) -> &[String] {
        &self.regexes
    }
}

/// One `<mbean>`.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// `<name>` as written (trimmed).
    pub name: String,
    read: Values,
    write: Values,
    exec: Values,
}

impl Entry {
    pub fn values(&self, access: Access) -> &Values {
        match access {
            Access::Read => &self.read,
            Access::Write => &self.write,
            Access::Exec => &self.exec,
        }
    }
}

/// The raw content of one `<mbean>` before compilation.
#[derive(Debug, Default)]
pub(crate) struct RawEntry {
    pub name: String,
    pub read: Vec<String>,
    pub write: Vec<String>,
    pub exec: Vec<String>,
}

/// A compiled `<allow>` or `<deny>` configuration.
#[derive(Debug, Clone, Default)]
pub(crate) struct Section {
    entries: Vec<Entry>,
    /// Canonical `<name>` → entry (patterns included, as in Jolokia).
    by_name: HashMap<String, usize>,
    /// Patterns with a literal domain, by domain.
    patterns_by_domain: HashMap<String, Vec<(ObjectName, usize)>>,
    /// Patterns whose domain is a pattern too.
    patterns_any_domain: Vec<(ObjectName, usize)>,
}

impl Section {
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// Adds an entry; a later entry for an equal name replaces the earlier
    /// one (Jolokia's `Map.put`).
    pub fn add(&mut self, raw: RawEntry) -> Result<(), String> {
        let name = ObjectName::parse(&raw.name)
            .map_err(|e| format!("javax.management.MalformedObjectNameException: {e}"))?;
        let compile = |list: &[String]| {
            let mut v = Values::default();
            for value in list {
                v.add(value);
            }
            v
        };
        let entry = Entry {
            name: raw.name.clone(),
            read: compile(&raw.read),
            write: compile(&raw.write),
            exec: compile(&raw.exec),
        };
        if let Some(&i) = self.by_name.get(name.canonical_str()) {
            self.entries[i] = entry;
            return Ok(());
        }
        let i = self.entries.len();
        self.entries.push(entry);
        self.by_name.insert(name.canonical(), i);
        if name.is_pattern() {
            if name.is_domain_pattern() {
                self.patterns_any_domain.push((name, i));
            } else {
                self.patterns_by_domain
                    .entry(name.domain().to_string())
                    .or_default()
                    .push((name, i));
            }
        }
        Ok(())
    }

    /// The entries deciding for `name`: the one with an equal `<name>`, or
    /// else every pattern that matches it (Jolokia takes an arbitrary one
    /// of those; callers combine them conservatively).
    pub fn candidates<'a>(&'a self, name: &'a ObjectName) -> impl Iterator<Item = &'a Entry> + 'a {
        let exact = self
            .by_name
            .get(name.canonical_str())
            .map(|&i| &self.entries[i]);
        let patterns = exact.is_none().then(|| {
            self.patterns_by_domain
                .get(name.domain())
                .into_iter()
                .flatten()
                .chain(&self.patterns_any_domain)
                .filter(move |(p, _)| p.matches(name))
                .map(|&(_, i)| &self.entries[i])
        });
        exact.into_iter().chain(patterns.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(list: &[&str]) -> Values {
        let mut v = Values::default();
        for x in list {
            v.add(x);
        }
        v
    }

    #[test]
    fn wildcards_are_globs_and_never_wider_than_jolokia() {
        let v = values(&["g*", "a.c*", "*e*u*"]);
        assert!(v.matches("gc", false).is_some());
        assert!(v.matches("gc()", false).is_some());
        assert!(v.matches("Gc", false).is_none());
        assert!(v.matches("a.cd", false).is_some());
        // allow: '.' is literal
        assert!(v.matches("abcd", false).is_none());
        // deny: also Jolokia's '.' (any character)
        assert!(v.matches("abcd", true).is_some());
        assert!(v.matches("Queue", false).is_some());
        assert!(v.matches("Name", false).is_none());
        // allow: '*' stops at line ends, like Java's '.*'; deny: it doesn't
        assert!(v.matches("g\nx", false).is_none());
        assert!(v.matches("g\nx", true).is_some());
    }

    #[test]
    fn regex_like_values() {
        let v = values(&["foo(*", "bar*"]);
        // deny: everything; allow: only literal entries
        assert!(matches!(v.matches("anything", true), Some(Hit::Regex(_))));
        assert!(v.matches("barx", false).is_none());
        assert!(matches!(v.matches("foo(*", false), Some(Hit::Listed(_))));
        assert!(v.denies_everything());
        assert!(values(&["**"]).denies_everything());
        assert!(!values(&["a*"]).denies_everything());
    }
}
