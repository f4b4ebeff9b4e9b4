//! `jmxgate audit query`: records matching filters, as JSON lines or a
//! table.

use std::time::SystemTime;

use super::record::Entry;

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub principal: Option<String>,
    pub target: Option<String>,
    pub kind: Option<String>,
    /// `allowed` or `denied`.
    pub decision: Option<String>,
    pub event: Option<String>,
    /// `mcp` (tool calls), or `jolokia` (records without a channel).
    pub channel: Option<String>,
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
    /// One access request's steps: its `access_*` records, and the item
    /// records whose rule names it (an item that asked for approval, or
    /// ran on it).
    pub access_request: Option<String>,
}

/// Parses `2026-11-22T10:00:00Z` (or without the `Z`, as UTC).
pub fn parse_time(s: &str) -> Result<SystemTime, String> {
    humantime::parse_rfc3339_weak(s.trim_end_matches('Z'))
        .map_err(|e| format!("\"{s}\" is not a time like 2026-11-22T10:00:00Z ({e})"))
}

impl Filter {
    pub fn matches(&self, e: &Entry) -> bool {
        let eq = |want: &Option<String>, have: &Option<String>| {
            want.as_ref().is_none_or(|w| have.as_ref() == Some(w))
        };
        if !eq(&self.principal, &e.principal)
            || !eq(&self.target, &e.target)
            || !eq(&self.kind, &e.kind)
            || !eq(&self.decision, &e.decision)
            || self.event.as_ref().is_some_and(|ev| *ev != e.event)
            || self
                .channel
                .as_ref()
                .is_some_and(|c| c != e.channel.as_deref().unwrap_or("jolokia"))
        {
            return false;
        }
        if let Some(id) = &self.access_request {
            let named = e.access_request.as_ref() == Some(id)
                || e.rule.as_deref().is_some_and(|r| r.contains(id.as_str()));
            if !named {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Ok(t) = parse_time(&e.time) else {
                return false;
            };
            if self.since.is_some_and(|s| t < s) || self.until.is_some_and(|u| t > u) {
                return false;
            }
        }
        true
    }
}

/// Reads every complete record of the files, in order.
pub fn read(files: &[std::path::PathBuf]) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f)?;
        for line in text.lines() {
            if let Ok(e) = serde_json::from_str::<Entry>(line) {
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// A fixed-width table of the most useful columns.
pub fn table(entries: &[&Entry]) -> String {
    let header = [
        "SEQ",
        "TIME",
        "PRINCIPAL",
        "TARGET",
        "TYPE",
        "MBEAN",
        "DECISION",
        "STATUS",
    ];
    let rows: Vec<[String; 8]> = entries
        .iter()
        .map(|e| {
            let what = e.operation.clone().or_else(|| {
                e.attribute.as_ref().map(|a| {
                    a.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| a.to_string())
                })
            });
            let mbean = match (&e.mbean, what) {
                (Some(m), Some(w)) => format!("{m} {w}"),
                (Some(m), None) => m.clone(),
                (None, _) => e.note.clone().unwrap_or_default(),
            };
            [
                e.seq.to_string(),
                e.time.clone(),
                e.principal.clone().unwrap_or_else(|| "-".into()),
                e.target.clone().unwrap_or_else(|| "-".into()),
                e.kind.clone().unwrap_or_else(|| e.event.clone()),
                mbean,
                e.decision.clone().unwrap_or_else(|| "-".into()),
                e.status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count()).min(60);
        }
    }
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| {
                let c: String = c.chars().take(*w).collect();
                format!("{c:<w$}")
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(&header.map(String::from));
    for r in &rows {
        out.push('\n');
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(principal: &str, decision: &str, time: &str) -> Entry {
        Entry {
            time: time.into(),
            event: "item".into(),
            principal: Some(principal.into()),
            decision: Some(decision.into()),
            kind: Some("read".into()),
            mbean: Some("java.lang:type=Memory".into()),
            ..Entry::default()
        }
    }

    #[test]
    fn filters_combine() {
        let a = entry("alice", "allowed", "2026-11-22T10:00:00.000Z");
        let b = entry("bob", "denied", "2026-11-22T12:00:00.000Z");
        let f = Filter {
            decision: Some("denied".into()),
            ..Filter::default()
        };
        assert!(!f.matches(&a) && f.matches(&b));
        let f = Filter {
            since: Some(parse_time("2026-11-22T11:00:00Z").unwrap()),
            ..Filter::default()
        };
        assert!(!f.matches(&a) && f.matches(&b));
        let f = Filter {
            principal: Some("alice".into()),
            until: Some(parse_time("2026-11-22T11:00:00").unwrap()),
            ..Filter::default()
        };
        assert!(f.matches(&a) && !f.matches(&b));
        assert!(parse_time("yesterday").is_err());
        let asked = Entry {
            access_request: Some("ar-01".into()),
            ..a.clone()
        };
        let ran = Entry {
            rule: Some("role ops: <allow>; approved by access request ar-01, used now".into()),
            ..b.clone()
        };
        let f = Filter {
            access_request: Some("ar-01".into()),
            ..Filter::default()
        };
        assert!(f.matches(&asked) && f.matches(&ran) && !f.matches(&a));
    }

    #[test]
    fn table_has_a_header_and_a_row_each() {
        let a = entry("alice", "allowed", "t");
        let t = table(&[&a]);
        assert_eq!(t.lines().count(), 2);
        assert!(t.starts_with("SEQ"));
        assert!(t.contains("alice") && t.contains("java.lang:type=Memory"));
    }
}
