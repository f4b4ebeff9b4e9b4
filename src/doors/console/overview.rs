//! The fleet overview: every target the caller may see, counted up and
//! down per group (a label of the caller's choice), filtered by selector
//! and text, one page at a time in fleet order. The selection is pure;
//! the page is HTML made with maud, which escapes every value (target
//! names, labels and agents' errors are not to be trusted).

use std::collections::BTreeMap;
use std::sync::Arc;

use maud::{html, Markup};

use crate::access::TargetSelector;
use crate::fleet::Target;

/// Rows on a page unless `limit` says otherwise, and the most it may say.
const DEFAULT_ROWS: usize = 100;
const MAX_ROWS: usize = 1000;
/// Longest filter text and selector taken.
const MAX_FILTER: usize = 256;

/// What the caller asked the overview for (`?q=&selector=&group=&after=&limit=`).
#[derive(Debug, Default)]
pub struct Query {
    pub text: String,
    /// `text` lowercased once, for matching every target.
    text_lower: String,
    pub selector_text: String,
    pub selector: Option<TargetSelector>,
    pub group: String,
    pub after: Option<String>,
    pub limit: usize,
}

impl Query {
    /// Reads the query string; `Err` says which parameter is wrong.
    pub fn parse(query: Option<&str>) -> Result<Query, String> {
        let mut q = Query {
            limit: DEFAULT_ROWS,
            ..Query::default()
        };
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if value.len() > MAX_FILTER {
                return Err(format!("{key}: at most {MAX_FILTER} bytes"));
            }
            let value = value.trim().to_string();
            match key.as_ref() {
                "q" => {
                    q.text_lower = value.to_lowercase();
                    q.text = value;
                }
                "selector" if !value.is_empty() => {
                    q.selector = Some(
                        TargetSelector::parse(&value)
                            .map_err(|e| format!("selector \"{value}\": {e}"))?,
                    );
                    q.selector_text = value;
                }
                "group" => q.group = value,
                "after" if !value.is_empty() => q.after = Some(value),
                "limit" => {
                    q.limit = match value.parse::<usize>() {
                        Ok(n @ 1..=MAX_ROWS) => n,
                        _ => return Err(format!("limit: a number from 1 to {MAX_ROWS}")),
                    }
                }
                _ => {}
            }
        }
        Ok(q)
    }

    /// Whether a target passes the filters (text and selector).
    pub fn keeps(&self, t: &Target) -> bool {
        let text = &self.text_lower;
        self.selector.as_ref().is_none_or(|s| s.matches(t))
            && (text.is_empty()
                || t.name.to_lowercase().contains(text)
                || t.labels.values().any(|v| v.to_lowercase().contains(text)))
    }
}

/// Up, down and not yet known, for a group or the whole selection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub up: usize,
    pub down: usize,
    pub unknown: usize,
}

/// One page of the overview.
pub struct Overview<'a> {
    pub total: Counts,
    /// Per value of the group label (`""`: targets without it).
    pub groups: BTreeMap<String, Counts>,
    pub rows: Vec<&'a Arc<Target>>,
    /// The name a next page starts after.
    pub next: Option<String>,
}

/// The overview of `visible` (the targets the caller may see) for `q`.
/// `Err`: `after` names no target in the selection.
pub fn select<'a>(
    visible: impl Iterator<Item = &'a Arc<Target>>,
    q: &Query,
) -> Result<Overview<'a>, String> {
    let mut total = Counts::default();
    let mut groups: BTreeMap<String, Counts> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut next = None;
    let mut started = q.after.is_none();
    let mut found_after = q.after.is_none();
    for t in visible.filter(|t| q.keeps(t)) {
        let up = t.health.is_up();
        let count = |c: &mut Counts| match up {
            Some(true) => c.up += 1,
            Some(false) => c.down += 1,
            None => c.unknown += 1,
        };
        count(&mut total);
        if !q.group.is_empty() {
            let value = t
                .labels
                .get(&q.group)
                .map(str::to_string)
                .unwrap_or_default();
            count(groups.entry(value).or_default());
        }
        if !started {
            if q.after.as_deref() == Some(t.name.as_str()) {
                started = true;
                found_after = true;
            }
            continue;
        }
        if rows.len() < q.limit {
            rows.push(t);
        } else if next.is_none() {
            next = rows.last().map(|r: &&Arc<Target>| r.name.clone());
        }
    }
    if !found_after {
        return Err("after: no such target in this selection; use the link a page gives".into());
    }
    Ok(Overview {
        total,
        groups,
        rows,
        next,
    })
}

/// A query string for the overview, `after` and group value as given.
fn link(base: &str, q: &Query, after: Option<&str>, selector: &str) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [
        ("q", q.text.as_str()),
        ("selector", selector),
        ("group", &q.group),
    ] {
        if !v.is_empty() {
            s.append_pair(k, v);
        }
    }
    if q.limit != DEFAULT_ROWS {
        s.append_pair("limit", &q.limit.to_string());
    }
    if let Some(a) = after {
        s.append_pair("after", a);
    }
    format!("{base}/?{}", s.finish())
}

/// The page.
pub fn render(o: &Overview<'_>, q: &Query, base: &str, viewer: &super::page::Viewer<'_>) -> Markup {
    let body = html! {
        form.filters method="get" action={ (base) "/" } {
            label { "Text " input type="search" name="q" value=(q.text) maxlength="256"; }
            label { "Selector " input type="text" name="selector" value=(q.selector_text)
                placeholder="env=prod,app=orders" maxlength="256"; }
            label { "Group by label " input type="text" name="group" value=(q.group)
                placeholder="namespace" maxlength="256"; }
            button type="submit" { "Show" }
        }
        p.summary {
            span.up { (o.total.up) " up" } " · "
            span.down { (o.total.down) " down" } " · "
            span.unknown { (o.total.unknown) " not yet probed" }
        }
        @if !o.groups.is_empty() {
            table.groups {
                thead { tr { th { (q.group) } th { "up" } th { "down" } th { "not yet probed" } } }
                tbody {
                    @for (value, c) in &o.groups {
                        tr {
                            td {
                                @if value.is_empty() {
                                    em { "(none)" }
                                } @else {
                                    a href=(link(base, q, None, &format!("{}={}", q.group, value))) { (value) }
                                }
                            }
                            td { (c.up) } td { (c.down) } td { (c.unknown) }
                        }
                    }
                }
            }
        }
        table.targets {
            thead { tr {
                th { "target" } th { "state" } th { "breaker" } th { "agent" }
                th { "latency" } th { "last seen" } th { "last error" } th { "labels" }
            } }
            tbody {
                @for t in &o.rows {
                    @let v = t.view();
                    tr class=(v.health.state) {
                        td.name { a href={ (base) "/targets/" (super::target::encode(v.name)) } { (v.name) } }
                        td { (v.health.state) }
                        td { (v.health.breaker) }
                        td { (v.agent.version.as_deref().unwrap_or("")) " "
                             small { (v.agent.protocol.as_deref().map(|p| format!("protocol {p}")).unwrap_or_default()) } }
                        td { (v.health.latency_ms.map(|l| format!("{l} ms")).unwrap_or_default()) }
                        td { (v.health.last_check.as_deref().unwrap_or("")) }
                        td.error { (v.health.last_error.as_deref().unwrap_or("")) }
                        td.labels {
                            @for (k, val) in v.labels.iter() {
                                span.label { (k) "=" (val) } " "
                            }
                        }
                    }
                }
            }
        }
        @if let Some(after) = &o.next {
            p { a.next href=(link(base, q, Some(after), &q.selector_text)) { "Next page" } }
        }
    };
    // The fleet's states change by themselves: the page asks again.
    super::page::layout_refreshing(
        "Fleet",
        base,
        viewer,
        Some(super::page::REFRESH_SECONDS),
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_bounded_and_say_what_is_wrong() {
        let q = Query::parse(Some("q=ord&selector=env%3Dprod&group=namespace&limit=5")).unwrap();
        assert_eq!(
            (q.text.as_str(), q.group.as_str(), q.limit),
            ("ord", "namespace", 5)
        );
        assert!(q.selector.is_some());
        assert_eq!(Query::parse(None).unwrap().limit, DEFAULT_ROWS);
        for (bad, names) in [
            ("limit=0", "limit"),
            ("limit=100000", "limit"),
            ("selector=env%3D", "selector"),
        ] {
            let e = Query::parse(Some(bad)).unwrap_err();
            assert!(e.contains(names), "{bad}: {e}");
        }
        let long = format!("q={}", "x".repeat(MAX_FILTER + 1));
        assert!(Query::parse(Some(&long)).unwrap_err().contains("at most"));
    }
}
