//! JMX ObjectName syntax, checked before anything is forwarded: Jolokia 2.5+
//! fails a whole bulk on one bad name, so the gateway catches it per item.
//! The rules follow `javax.management.ObjectName`.

use std::fmt;
use std::sync::Arc;

/// A syntactically valid ObjectName, kept exactly as the client wrote it.
/// Shared, not copied: a request's name travels to its job, its audit
/// record and its echo, and a clone is a reference count.
#[derive(Clone, PartialEq, Eq)]
pub struct ObjectName(Arc<Parts>);

impl fmt::Debug for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Parts {
    raw: String,
    domain_end: usize,
    properties: Vec<(String, String)>,
    /// Per property: whether its value is a pattern (`*`/`?`, unescaped).
    value_patterns: Vec<bool>,
    property_list_pattern: bool,
    value_pattern: bool,
    /// Java's `getCanonicalName()`, computed once at parse time.
    canonical: String,
}

impl ObjectName {
    pub fn parse(raw: &str) -> Result<ObjectName, String> {
        let bad = |why: &str| Err(format!("Invalid object name \"{raw}\": {why}"));
        if raw.is_empty() {
            return bad("it is empty");
        }
        let Some(colon) = raw.find(':') else {
            return bad("domain part must be followed by ':' and key properties");
        };
        let domain = &raw[..colon];
        if domain.contains('\n') {
            return bad("the domain contains a newline");
        }
        let rest = &raw[colon + 1..];
        if rest.is_empty() {
            return bad("key properties cannot be empty");
        }
        let mut name = Parts {
            raw: raw.to_string(),
            domain_end: colon,
            properties: Vec::new(),
            value_patterns: Vec::new(),
            property_list_pattern: false,
            value_pattern: false,
            canonical: String::new(),
        };
        for part in
            split_properties(rest).map_err(|why| format!("Invalid object name \"{raw}\": {why}"))?
        {
            if part == "*" {
                if name.property_list_pattern {
                    return bad("more than one '*' in the key properties");
                }
                name.property_list_pattern = true;
                continue;
            }
            let Some(eq) = part.find('=') else {
                return bad(&format!("key property \"{part}\" has no '='"));
            };
            let (key, value) = (&part[..eq], &part[eq + 1..]);
            if key.is_empty() {
                return bad("a key is empty");
            }
            if let Some(c) = key
                .chars()
                .find(|c| matches!(c, ':' | '*' | '?' | '\n' | '"' | '='))
            {
                return bad(&format!(
                    "key \"{key}\" contains an illegal character {c:?}"
                ));
            }
            if value.is_empty() {
                return bad(&format!("the value of key \"{key}\" is empty"));
            }
            let mut is_pattern = false;
            if value.starts_with('"') {
                if check_quoted(value)
                    .map_err(|why| format!("Invalid object name \"{raw}\": {why}"))?
                {
                    is_pattern = true;
                }
            } else {
                if let Some(c) = value
                    .chars()
                    .find(|c| matches!(c, ':' | '"' | '=' | '\n' | ','))
                {
                    return bad(&format!(
                        "value of key \"{key}\" contains an illegal character {c:?}"
                    ));
                }
                if value.contains(['*', '?']) {
                    is_pattern = true;
                }
            }
            name.value_pattern |= is_pattern;
            if name.properties.iter().any(|(k, _)| k == key) {
                return bad(&format!("key \"{key}\" appears twice"));
            }
            name.properties.push((key.to_string(), value.to_string()));
            name.value_patterns.push(is_pattern);
        }
        if name.properties.is_empty() && !name.property_list_pattern {
            return bad("key properties cannot be empty");
        }
        name.canonical = name.compute_canonical();
        Ok(ObjectName(Arc::new(name)))
    }

    pub fn as_str(&self) -> &str {
        &self.0.raw
    }

    pub fn domain(&self) -> &str {
        &self.0.raw[..self.0.domain_end]
    }

    /// Key properties in the order written (values as written, quotes kept).
    pub fn properties(&self) -> &[(String, String)] {
        &self.0.properties
    }

    pub fn is_pattern(&self) -> bool {
        self.is_domain_pattern() || self.0.property_list_pattern || self.0.value_pattern
    }

    /// The domain holds `*` or `?`.
    pub fn is_domain_pattern(&self) -> bool {
        self.domain().contains(['*', '?'])
    }

    /// The key properties end in `,*` (or are just `*`): other keys may
    /// be present in a matching name.
    pub fn is_property_list_pattern(&self) -> bool {
        self.0.property_list_pattern
    }

    /// Some key property value holds an (unescaped) `*` or `?`.
    pub fn is_property_value_pattern(&self) -> bool {
        self.0.value_pattern
    }

    /// The value of one key property, as written (quotes kept).
    pub fn key_property(&self, key: &str) -> Option<&str> {
        self.0
            .properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Java's `ObjectName.getCanonicalName()`: the domain, then the key
    /// properties sorted by key (values as written), then `,*` (or `*`
    /// alone) for a property list pattern. Two names are equal for JMX
    /// exactly when their canonical names are.
    pub fn canonical(&self) -> String {
        self.0.canonical.clone()
    }

    /// [`canonical`](Self::canonical) without the copy.
    pub fn canonical_str(&self) -> &str {
        &self.0.canonical
    }

    /// JMX `ObjectName.apply`: does this name (usually a pattern) match
    /// `name`? The domain is a glob with `*` and `?`; a property list
    /// pattern (`,*`) lets `name` have further keys; a value with `*`/`?`
    /// is a glob over the value as written; key order never matters.
    /// A pattern `name` never matches (as in JMX), except that two equal
    /// names (same canonical name) always do.
    pub fn matches(&self, name: &ObjectName) -> bool {
        if self.0.canonical == name.0.canonical {
            return true;
        }
        if name.is_pattern() || !self.is_pattern() {
            return false;
        }
        let domain_ok = if self.is_domain_pattern() {
            wildmatch(name.domain(), self.domain())
        } else {
            self.domain() == name.domain()
        };
        domain_ok && self.match_keys(name)
    }

    fn match_keys(&self, name: &ObjectName) -> bool {
        if self.0.value_pattern
            && !self.0.property_list_pattern
            && name.0.properties.len() != self.0.properties.len()
        {
            return false;
        }
        if self.0.value_pattern || self.0.property_list_pattern {
            return self.0.properties.iter().zip(&self.0.value_patterns).all(
                |((key, value), &is_pattern)| match name.key_property(key) {
                    None => false,
                    Some(v) if is_pattern => wildmatch(v, value),
                    Some(v) => v == value,
                },
            );
        }
        // Only the domain is a pattern: the key property lists must be equal.
        self.canonical_properties() == name.canonical_properties()
    }

    /// The part of the canonical name after the domain's `:`.
    fn canonical_properties(&self) -> &str {
        &self.0.canonical[self.0.domain_end + 1..]
    }
}

impl Parts {
    fn compute_canonical(&self) -> String {
        let mut sorted: Vec<&(String, String)> = self.properties.iter().collect();
        // Java sorts keys with String.compareTo: UTF-16 code unit order.
        sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
        let mut out = String::with_capacity(self.raw.len() + 2);
        out.push_str(&self.raw[..self.domain_end]);
        out.push(':');
        for (i, (k, v)) in sorted.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push('=');
            out.push_str(v);
        }
        if self.property_list_pattern {
            if !self.properties.is_empty() {
                out.push(',');
            }
            out.push('*');
        }
        out
    }
}

/// JMX's `Util.wildmatch`: `*` matches any run of characters, `?` exactly
/// one, everything else itself; anchored at both ends.
pub fn wildmatch(s: &str, pattern: &str) -> bool {
    let next = |text: &str, at: usize| text[at..].chars().next();
    let (mut si, mut pi) = (0usize, 0usize);
    // Where to resume after the last '*': (pattern index after it, string index).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if let Some(pc) = next(pattern, pi) {
            let sc = next(s, si);
            match (pc, sc) {
                ('*', _) => {
                    pi += 1;
                    star = Some((pi, si));
                    continue;
                }
                ('?', Some(c)) => {
                    si += c.len_utf8();
                    pi += 1;
                    continue;
                }
                (p, Some(c)) if p != '?' && p == c => {
                    si += c.len_utf8();
                    pi += p.len_utf8();
                    continue;
                }
                _ => {}
            }
        } else if si == s.len() {
            return true;
        }
        match star {
            Some((star_pi, star_si)) if star_si < s.len() => {
                pi = star_pi;
                si = star_si + next(s, star_si).map_or(1, char::len_utf8);
                star = Some((star_pi, si));
            }
            _ => return false,
        }
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.raw)
    }
}

/// Splits `k=v,k2="a,b",*` on commas outside quotes.
fn split_properties(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_quotes {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_quotes = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_quotes = true,
            ',' => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if in_quotes {
        return Err("a quoted value is not closed".into());
    }
    parts.push(&s[start..]);
    if parts.iter().any(|p| p.is_empty()) {
        return Err("empty key property (stray ',')".into());
    }
    Ok(parts)
}

/// Checks a quoted value; returns whether it holds an unescaped wildcard.
fn check_quoted(v: &str) -> Result<bool, String> {
    let inner = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .filter(|_| v.len() >= 2)
        .ok_or_else(|| format!("quoted value {v} is not closed"))?;
    let mut chars = inner.chars();
    let mut pattern = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('"' | '\\' | '*' | '?' | 'n') => {}
                other => {
                    return Err(format!(
                        "invalid escape \\{} in quoted value {v}",
                        other.map(String::from).unwrap_or_default()
                    ))
                }
            },
            '"' => return Err(format!("unescaped quote in quoted value {v}")),
            '\n' => return Err(format!("newline in quoted value {v}")),
            '*' | '?' => pattern = true,
            _ => {}
        }
    }
    Ok(pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_jmx_names_and_patterns() {
        for (name, pattern) in [
            ("java.lang:type=Memory", false),
            (
                "java.lang:type=GarbageCollector,name=G1 Young Generation",
                false,
            ),
            (":type=Foo", false),
            ("*:*", true),
            ("java.lang:*", true),
            ("java.lang:type=MemoryPool,*", true),
            ("java.*:type=Memory", true),
            ("d:type=a?c", true),
            ("d:name=\"a,b=c:d\"", false),
            ("d:name=\"star\\*\"", false),
            ("d:name=\"wild*\"", true),
            ("Catalina:type=Manager,context=/,host=localhost", false),
        ] {
            let n = ObjectName::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(n.is_pattern(), pattern, "{name}");
            assert_eq!(n.as_str(), name);
        }
    }

    #[test]
    fn rejects_malformed_names() {
        for name in [
            "",
            "java.lang",
            "java.lang:",
            "java.lang:type",
            "java.lang:=x",
            "d:type=",
            "d:a=1,a=2",
            "d:a=1,,b=2",
            "d:a=\"open",
            "d:a=x\"y",
            "d:*,*",
            "d:a=\"bad\\escape\"",
            "d:a:b=c",
        ] {
            assert!(ObjectName::parse(name).is_err(), "{name} should be invalid");
        }
    }

    #[test]
    fn exposes_domain_and_properties() {
        let n = ObjectName::parse("java.lang:type=MemoryPool,name=Metaspace").unwrap();
        assert_eq!(n.domain(), "java.lang");
        assert_eq!(
            n.properties()[1],
            ("name".to_string(), "Metaspace".to_string())
        );
    }

    fn on(s: &str) -> ObjectName {
        ObjectName::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn canonical_names_sort_keys_like_java() {
        for (name, canonical) in [
            ("java.lang:type=Memory", "java.lang:type=Memory"),
            ("d:b=2,a=1", "d:a=1,b=2"),
            ("d:type=Foo,*", "d:type=Foo,*"),
            ("d:*,type=Foo", "d:type=Foo,*"),
            ("java.lang:*", "java.lang:*"),
            ("*:*", "*:*"),
            ("d:name=\"x,y\",a=1", "d:a=1,name=\"x,y\""),
            ("d:B=1,a=2", "d:B=1,a=2"),
        ] {
            assert_eq!(on(name).canonical(), canonical, "{name}");
            assert_eq!(on(name).canonical_str(), canonical, "{name}");
        }
    }

    #[test]
    fn pattern_matching_follows_objectname_apply() {
        for (pattern, name, expected) in [
            // exact names: canonical equality
            ("java.lang:type=Memory", "java.lang:type=Memory", true),
            ("d:a=1,b=2", "d:b=2,a=1", true),
            ("d:a=1", "d:a=1,b=2", false),
            // property list patterns
            ("java.lang:*", "java.lang:type=Memory", true),
            ("java.lang:*", "javax.lang:type=Memory", false),
            ("jolokia:type=Config,*", "jolokia:type=Config", true),
            (
                "jolokia:type=Config,*",
                "jolokia:name=Bla,type=Config",
                true,
            ),
            (
                "jolokia:type=Config,*",
                "jolokia:type=Other,name=Bla",
                false,
            ),
            ("jolokia:type=Config,*", "jolokia:name=Bla", false),
            ("*:*", "any.domain:x=y", true),
            // domain globs
            ("java.*:type=Memory", "java.lang:type=Memory", true),
            ("java.*:type=Memory", "java.lang:type=Memory,name=x", false),
            ("java.?ang:type=Memory", "java.lang:type=Memory", true),
            ("java.?ang:type=Memory", "java.llang:type=Memory", false),
            ("*:type=Memory", ":type=Memory", true),
            ("d*:a=1,*", "domain:b=2,a=1", true),
            // value patterns: same number of keys unless ,*
            ("d:type=Mem*", "d:type=Memory", true),
            ("d:type=Mem*", "d:type=Memory,name=x", false),
            ("d:type=Mem*,*", "d:type=Memory,name=x", true),
            ("d:type=M?mory,name=x", "d:name=x,type=Memory", true),
            ("d:type=M?mory,name=x", "d:name=y,type=Memory", false),
            ("d:type=*", "d:type=anything", true),
            ("d:type=*", "d:name=anything", false),
            // quoted values are matched as written, quotes included
            ("d:name=\"wild*\"", "d:name=\"wildcard\"", true),
            ("d:name=\"wild*\"", "d:name=wildcard", false),
            ("d:name=\"star\\*\"", "d:name=\"star\\*\"", true),
            // a pattern name never matches as the candidate, unless equal
            ("java.lang:*", "java.lang:type=*", false),
            ("java.lang:*", "java.lang:type=Memory,*", false),
            ("java.lang:*", "java.lang:*", true),
            ("d:type=Foo,*", "d:*,type=Foo", true),
            ("java.lang:type=Memory", "java.lang:*", false),
        ] {
            assert_eq!(
                on(pattern).matches(&on(name)),
                expected,
                "{pattern} matches {name}"
            );
        }
    }

    #[test]
    fn pattern_kinds_and_key_lookup() {
        let n = on("d*:type=a?c,name=x,*");
        assert!(n.is_domain_pattern());
        assert!(n.is_property_list_pattern());
        assert!(n.is_property_value_pattern());
        assert_eq!(n.key_property("type"), Some("a?c"));
        assert_eq!(n.key_property("nope"), None);
        let plain = on("d:type=x");
        assert!(!plain.is_domain_pattern() && !plain.is_property_list_pattern());
        assert!(!plain.is_property_value_pattern());
    }

    #[test]
    fn wildmatch_backtracks() {
        assert!(wildmatch("abcbcd", "a*bcd"));
        assert!(wildmatch("", "*"));
        assert!(!wildmatch("", "?"));
        assert!(wildmatch("abc", "a?c"));
        assert!(!wildmatch("abcx", "a*c"));
        assert!(wildmatch("aXbYc", "a*b*c"));
        assert!(!wildmatch("ab", "a*b*c"));
    }
}
