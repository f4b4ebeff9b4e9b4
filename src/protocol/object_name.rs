//! JMX ObjectName syntax, checked before anything is forwarded: Jolokia 2.5+
//! fails a whole bulk on one bad name, so the gateway catches it per item.
//! The rules follow `javax.management.ObjectName`.

use std::fmt;

/// A syntactically valid ObjectName, kept exactly as the client wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    raw: String,
    domain_end: usize,
    properties: Vec<(String, String)>,
    property_list_pattern: bool,
    value_pattern: bool,
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
        let mut name = ObjectName {
            raw: raw.to_string(),
            domain_end: colon,
            properties: Vec::new(),
            property_list_pattern: false,
            value_pattern: false,
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
            if value.starts_with('"') {
                if check_quoted(value)
                    .map_err(|why| format!("Invalid object name \"{raw}\": {why}"))?
                {
                    name.value_pattern = true;
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
                    name.value_pattern = true;
                }
            }
            if name.properties.iter().any(|(k, _)| k == key) {
                return bad(&format!("key \"{key}\" appears twice"));
            }
            name.properties.push((key.to_string(), value.to_string()));
        }
        if name.properties.is_empty() && !name.property_list_pattern {
            return bad("key properties cannot be empty");
        }
        Ok(name)
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }

    pub fn domain(&self) -> &str {
        &self.raw[..self.domain_end]
    }

    /// Key properties in the order written (values as written, quotes kept).
    pub fn properties(&self) -> &[(String, String)] {
        &self.properties
    }

    pub fn is_pattern(&self) -> bool {
        self.domain().contains(['*', '?']) || self.property_list_pattern || self.value_pattern
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
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
}
