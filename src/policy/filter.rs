//! `<filter>`: Jolokia's `MBeanNameFilter`, which hides names from `list`
//! and `search` answers (it does not restrict access).
//!
//! Each `<mbean>` is either a bare domain (`domain1`, `domain1:*`) or an
//! ObjectName whose domain and every key property must match. Domains and
//! values take at most one `*` (prefix/suffix match); `?` is literal.

use crate::protocol::ObjectName;

/// `prefix*suffix` or an exact string (Jolokia's Domain/PropertyMatcher).
#[derive(Debug, Clone)]
enum Text {
    Exact(String),
    Affix {
        prefix: Option<String>,
        suffix: Option<String>,
    },
}

impl Text {
    fn matches(&self, s: &str) -> bool {
        match self {
            Text::Exact(e) => s == e,
            Text::Affix { prefix, suffix } => {
                prefix.as_deref().is_none_or(|p| s.starts_with(p))
                    && suffix.as_deref().is_none_or(|x| s.ends_with(x))
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Matcher {
    domain: Text,
    properties: Vec<(String, Text)>,
}

/// A compiled `<filter>` section.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    matchers: Vec<Matcher>,
}

/// Java's `split("\\*")`: trailing empty parts are dropped.
fn java_split_star(s: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split('*').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

fn single_glob(pattern: &str) -> Result<(), String> {
    if pattern.matches('*').count() > 1 {
        return Err(format!("Can't use multiple Glob patterns: \"{pattern}\""));
    }
    Ok(())
}

fn non_empty(s: Option<&&str>) -> Option<String> {
    s.filter(|p| !p.is_empty()).map(|p| p.to_string())
}

fn domain_text(pattern: &str) -> Result<Text, String> {
    single_glob(pattern)?;
    if !pattern.contains('*') {
        return Ok(Text::Exact(pattern.to_string()));
    }
    let parts = java_split_star(pattern);
    if parts.is_empty() {
        // Jolokia fails here (ArrayIndexOutOfBoundsException): a lone `*`
        // domain cannot be loaded.
        return Err(format!(
            "Invalid MBean name filter: \"{pattern}\" (a domain of just '*' is not supported)"
        ));
    }
    Ok(Text::Affix {
        prefix: non_empty(parts.first()),
        suffix: non_empty(parts.get(1)),
    })
}

fn value_text(key: &str, pattern: &str) -> Result<Text, String> {
    if key.contains('*') {
        return Err(format!("Key can't contain wildcard: \"{key}\""));
    }
    single_glob(pattern)?;
    if !pattern.contains('*') {
        return Ok(Text::Exact(pattern.to_string()));
    }
    let parts = java_split_star(pattern);
    Ok(Text::Affix {
        prefix: non_empty(parts.first()),
        suffix: non_empty(parts.get(1)),
    })
}

impl Filter {
    /// Adds one `<filter><mbean>` (its text content).
    pub fn add(&mut self, text: &str) -> Result<(), String> {
        let pattern = super::xml::java_trim(text);
        if pattern.is_empty() {
            return Ok(());
        }
        let domain_only = !pattern.contains(':')
            || (pattern.ends_with(":*") && pattern.find(':') == Some(pattern.len() - 2));
        let matcher = if domain_only {
            let domain = pattern.strip_suffix(":*").unwrap_or(pattern);
            Matcher {
                domain: domain_text(super::xml::java_trim(domain))?,
                properties: Vec::new(),
            }
        } else {
            let name = ObjectName::parse(pattern)
                .map_err(|e| format!("Invalid MBean name filter: \"{pattern}\": {e}"))?;
            let domain = domain_text(name.domain())?;
            let properties = name
                .properties()
                .iter()
                .map(|(k, v)| Ok((k.clone(), value_text(k, v)?)))
                .collect::<Result<_, String>>()?;
            Matcher { domain, properties }
        };
        self.matchers.push(matcher);
        Ok(())
    }

    pub fn hidden(&self, name: &ObjectName) -> bool {
        self.matchers.iter().any(|m| {
            m.domain.matches(name.domain())
                && m.properties
                    .iter()
                    .all(|(k, t)| name.key_property(k).is_some_and(|v| t.matches(v)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(specs: &[&str]) -> Filter {
        let mut f = Filter::default();
        for s in specs {
            f.add(s).unwrap();
        }
        f
    }

    fn hidden(f: &Filter, name: &str) -> bool {
        f.hidden(&ObjectName::parse(name).unwrap())
    }

    #[test]
    fn domains_and_properties() {
        let f = filter(&["d1", "d2:*", "p*", "*s", "a*z", "d6:type=x", "d7:k=*,v=V*"]);
        assert!(hidden(&f, "d1:a=b"));
        assert!(!hidden(&f, "d11:a=b"));
        assert!(hidden(&f, "d2:a=b"));
        assert!(hidden(&f, "pq:a=b"));
        assert!(hidden(&f, "xs:a=b"));
        assert!(hidden(&f, "abz:a=b"));
        assert!(hidden(&f, "d6:type=x,name=y"));
        assert!(!hidden(&f, "d6:type=xy"));
        assert!(hidden(&f, "d7:k=1,v=Void"));
        assert!(!hidden(&f, "d7:v=Void"));
        assert!(!hidden(&f, "d7:k=1,v=aVoid"));
    }

    #[test]
    fn what_jolokia_cannot_load() {
        for bad in ["*", "*:*", "a*b*", "d:k=a*b*", "*:type=x", "d:", "d:type"] {
            assert!(Filter::default().add(bad).is_err(), "{bad}");
        }
        assert!(Filter::default().add("  ").is_ok());
    }
}
