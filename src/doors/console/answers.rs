//! Fleet answers for people: a form over the reductions (`top`, `bottom`,
//! `sum`, `avg`, `min`, `max`, `count`, `group`) of one attribute over a
//! selector, answered as a table and a bar chart with the targets that
//! gave no value listed. The question becomes the same reduced `read`
//! item a client would send, run as the viewer through the shared
//! phases (reach, policy, the selector limit, one audit record per
//! target); this module only reads the form and draws the answer.

use crate::doors::DoorSections;
use crate::pipeline::RequestContext;
use axum::body::Body;
use http::Response;
use maud::{html, Markup};
use serde_json::Value;

use crate::pipeline::parse::ParsedItem;
use crate::pipeline::Gateway;
use crate::protocol::reduce::{Op, Reduce, Reduced, TargetError, MAX_RANKED};
use crate::protocol::{ProtocolError, Request};

use super::page;

/// Longest text a field takes.
const MAX_FIELD: usize = 512;
/// Entries `top` and `bottom` ask for unless `n` says otherwise.
const DEFAULT_N: usize = 10;
/// Rows of a table, bars of a chart and errors shown; past them, counted.
const MAX_ROWS: usize = 1000;
const MAX_BARS: usize = 50;
const MAX_ERRORS: usize = 200;

/// The reductions the form offers, as the protocol names them.
const OPS: &[(&str, &str)] = &[
    ("top", "top n"),
    ("bottom", "bottom n"),
    ("sum", "sum"),
    ("avg", "average"),
    ("min", "minimum"),
    ("max", "maximum"),
    ("count", "count"),
    ("group", "group by value"),
];

/// What the form asks (`?mbean=&attribute=&path=&selector=&op=&n=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub mbean: String,
    pub attribute: String,
    pub path: String,
    pub selector: String,
    pub op: String,
    pub n: usize,
}

impl Default for Question {
    fn default() -> Question {
        Question {
            mbean: String::new(),
            attribute: String::new(),
            path: String::new(),
            selector: "*".into(),
            op: "top".into(),
            n: DEFAULT_N,
        }
    }
}

impl Question {
    /// Reads the query string, and whether it asks anything (an empty
    /// form does not); `Err` names the field that is wrong.
    pub fn parse(query: Option<&str>) -> Result<(Question, bool), String> {
        let mut q = Question::default();
        let mut asked = false;
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if value.len() > MAX_FIELD {
                return Err(format!("{key}: at most {MAX_FIELD} bytes"));
            }
            let value = value.trim().to_string();
            match key.as_ref() {
                "mbean" => {
                    asked |= !value.is_empty();
                    q.mbean = value;
                }
                "attribute" => q.attribute = value,
                "path" => q.path = value,
                "selector" if !value.is_empty() => q.selector = value,
                "op" => {
                    if !OPS.iter().any(|(op, _)| *op == value) {
                        let known: Vec<&str> = OPS.iter().map(|(op, _)| *op).collect();
                        return Err(format!("op \"{value}\": one of {}", known.join(", ")));
                    }
                    q.op = value;
                }
                "n" if !value.is_empty() => {
                    q.n = match value.parse::<usize>() {
                        Ok(n @ 1..=MAX_RANKED) => n,
                        _ => return Err(format!("n: a number from 1 to {MAX_RANKED}")),
                    }
                }
                _ => {}
            }
        }
        if asked && q.attribute.is_empty() {
            return Err("attribute: name the attribute to read".into());
        }
        Ok((q, asked))
    }

    /// The reduced read a client would send for this question, typed; an
    /// MBean name that is none fails as that item would.
    pub fn item(&self) -> Result<ParsedItem, ProtocolError> {
        let op = match self.op.as_str() {
            "top" => Op::Top(self.n),
            "bottom" => Op::Bottom(self.n),
            "sum" => Op::Sum,
            "avg" => Op::Avg,
            "min" => Op::Min,
            "max" => Op::Max,
            "count" => Op::Count,
            // `parse` took only the ops of OPS.
            _ => Op::Group,
        };
        let mut read = Request::read(&self.mbean, Some(&self.attribute))?;
        if !self.path.is_empty() {
            read = read.at_path(&self.path);
        }
        let mut item = ParsedItem::to(&self.selector, read);
        item.reduce = Some(Reduce::new(op));
        Ok(item)
    }
}

/// One result to show: for a pattern read, one per attribute.
#[derive(Debug, PartialEq)]
pub enum Shown {
    /// sum, avg, count: a number (`None`: nothing to average).
    Number { value: Option<String>, count: u64 },
    /// min, max, top, bottom: entries best first.
    Ranked { rows: Vec<Row>, count: u64 },
    /// group: each value with how many targets answered it.
    Groups { rows: Vec<Row>, count: u64 },
}

/// A row of a table and, where `bar` is a number, a bar of the chart.
#[derive(Debug, PartialEq)]
pub struct Row {
    pub label: String,
    pub value: String,
    pub bar: Option<f64>,
    /// Who answered it (groups: the targets; ranked: the MBean if any).
    pub detail: String,
}

/// Reads a reduced answer into what the page shows, per attribute where
/// the read was of a pattern: `(attribute or "", shown)`.
pub fn shown(op: &str, reduced: &Reduced) -> Vec<(String, Shown)> {
    let single = match (&reduced.result, op) {
        (Value::Object(o), "min" | "max") => o.contains_key("target"),
        (Value::Object(_), _) => false,
        _ => true,
    };
    if single {
        let count = reduced.count.as_u64().unwrap_or(0);
        return vec![(String::new(), one(op, &reduced.result, count))];
    }
    let Value::Object(per_attribute) = &reduced.result else {
        return Vec::new();
    };
    per_attribute
        .iter()
        .map(|(attribute, result)| {
            let count = reduced.count[attribute].as_u64().unwrap_or(0);
            (attribute.clone(), one(op, result, count))
        })
        .collect()
}

fn one(op: &str, result: &Value, count: u64) -> Shown {
    match op {
        "sum" | "avg" | "count" => Shown::Number {
            value: (!result.is_null()).then(|| text(result)),
            count,
        },
        "group" => Shown::Groups {
            rows: result
                .as_array()
                .map(|groups| {
                    groups
                        .iter()
                        .map(|g| {
                            let targets: Vec<String> = g["targets"]
                                .as_array()
                                .map(|t| t.iter().map(entry_name).collect())
                                .unwrap_or_default();
                            Row {
                                label: text(&g["value"]),
                                value: targets.len().to_string(),
                                bar: Some(targets.len() as f64),
                                detail: targets.join(", "),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default(),
            count,
        },
        _ => {
            let entries: Vec<&Value> = match result {
                Value::Array(a) => a.iter().collect(),
                Value::Object(_) => vec![result],
                _ => Vec::new(),
            };
            Shown::Ranked {
                rows: entries
                    .into_iter()
                    .map(|e| Row {
                        label: e["target"].as_str().unwrap_or("").to_string(),
                        value: text(&e["value"]),
                        bar: e["value"].as_f64(),
                        detail: e["mbean"].as_str().unwrap_or("").to_string(),
                    })
                    .collect(),
                count,
            }
        }
    }
}

/// A group's member: a target's name, or for a pattern read
/// `{"target", "mbean"}`.
fn entry_name(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => format!(
            "{} ({})",
            other["target"].as_str().unwrap_or(""),
            other["mbean"].as_str().unwrap_or("")
        ),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The page: the form, and the item's answer if one was asked for.
pub fn render(base: &str, q: &Question, answer: Option<&Value>) -> Markup {
    html! {
        form.question method="get" action={ (base) "/answers" } {
            label { "MBean " input type="text" name="mbean" value=(q.mbean) required
                placeholder="java.lang:type=Memory" maxlength="512" size="40"; }
            label { "Attribute " input type="text" name="attribute" value=(q.attribute)
                placeholder="HeapMemoryUsage" maxlength="512"; }
            label { "Path " input type="text" name="path" value=(q.path)
                placeholder="used" maxlength="512"; }
            label { "Targets " input type="text" name="selector" value=(q.selector)
                placeholder="env=prod,app=orders" maxlength="512"; }
            label { "Answer "
                select name="op" {
                    @for (op, words) in OPS {
                        option value=(op) selected[*op == q.op] { (words) }
                    }
                }
            }
            label { "n " input type="number" name="n" value=(q.n) min="1" max=(MAX_RANKED); }
            button type="submit" { "Ask the fleet" }
        }
        @if let Some(answer) = answer {
            (answered(q, answer))
        }
    }
}

fn answered(q: &Question, answer: &Value) -> Markup {
    if answer["status"] != 200 {
        return html! {
            p.error { (answer["error"].as_str().unwrap_or("The fleet gave no answer.")) }
        };
    }
    let reduced: Reduced = match serde_json::from_value(answer["value"].clone()) {
        Ok(r) => r,
        Err(_) => return html! { p.error { "The answer is not a reduced answer." } },
    };
    html! {
        @for (attribute, shown) in shown(&q.op, &reduced) {
            section.answer {
                @if !attribute.is_empty() { h2 { (attribute) } }
                (shown_markup(&shown))
            }
        }
        (errors(&reduced))
    }
}

fn shown_markup(shown: &Shown) -> Markup {
    match shown {
        Shown::Number { value, count } => html! {
            p.result {
                strong.number { (value.as_deref().unwrap_or("no value")) }
                " from " (count) " values"
            }
        },
        Shown::Ranked { rows, count } => html! {
            p { (count) " values" }
            (chart(rows))
            (table(rows, "target", "value", "MBean"))
        },
        Shown::Groups { rows, count } => html! {
            p { (count) " values" }
            (chart(rows))
            (table(rows, "value", "targets", "which"))
        },
    }
}

fn table(rows: &[Row], label: &str, value: &str, detail: &str) -> Markup {
    let with_detail = rows.iter().any(|r| !r.detail.is_empty());
    html! {
        table.result {
            thead { tr { th { (label) } th { (value) } @if with_detail { th { (detail) } } } }
            tbody {
                @for r in rows.iter().take(MAX_ROWS) {
                    tr { td { (r.label) } td.value { (r.value) } @if with_detail { td { (r.detail) } } }
                }
            }
        }
        @if rows.len() > MAX_ROWS {
            p { (rows.len() - MAX_ROWS) " more rows not shown" }
        }
    }
}

/// Row height and label width of the chart, in SVG units.
const BAR_HEIGHT: usize = 22;
const LABEL_WIDTH: f64 = 260.0;
const BAR_WIDTH: f64 = 420.0;
/// Characters of a label drawn (the table has it whole).
const LABEL_CHARS: usize = 36;

/// A horizontal bar chart of the rows with a number, as inline SVG (no
/// script, no style attribute: the page's CSP allows neither). Bars are
/// to scale from zero; a negative value draws no bar.
fn chart(rows: &[Row]) -> Markup {
    let bars: Vec<(&Row, f64)> = rows
        .iter()
        .filter_map(|r| r.bar.filter(|b| b.is_finite()).map(|b| (r, b)))
        .take(MAX_BARS)
        .collect();
    let largest = bars.iter().map(|(_, b)| *b).fold(0.0_f64, f64::max);
    if bars.is_empty() {
        return html! {};
    }
    let height = bars.len() * BAR_HEIGHT;
    let width = LABEL_WIDTH + BAR_WIDTH + 120.0;
    html! {
        svg.chart role="img" aria-label="bar chart" width=(width) height=(height)
            viewBox=(format!("0 0 {width} {height}")) xmlns="http://www.w3.org/2000/svg" {
            @for (i, (row, value)) in bars.iter().enumerate() {
                @let y = i * BAR_HEIGHT;
                @let length = if largest > 0.0 && *value > 0.0 { value / largest * BAR_WIDTH } else { 0.0 };
                g {
                    text x=(LABEL_WIDTH - 8.0) y=(y + 15) text-anchor="end" { (short(&row.label)) }
                    rect.bar x=(LABEL_WIDTH) y=(y + 3) width=(format!("{length:.1}")) height=(BAR_HEIGHT - 6) {
                        title { (row.label) ": " (row.value) }
                    }
                    text x=(LABEL_WIDTH + length + 6.0) y=(y + 15) { (row.value) }
                }
            }
        }
        @if rows.len() > bars.len() && bars.len() == MAX_BARS {
            p { "The chart shows the first " (MAX_BARS) "." }
        }
    }
}

fn short(label: &str) -> String {
    if label.chars().count() > LABEL_CHARS {
        let cut: String = label.chars().take(LABEL_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        label.to_string()
    }
}

fn errors(reduced: &Reduced) -> Markup {
    if reduced.errors.is_empty() {
        return html! {};
    }
    let said = |e: &TargetError| {
        format!(
            "{}: {}",
            e.error_type.as_deref().unwrap_or("error"),
            e.error.as_deref().unwrap_or("")
        )
    };
    html! {
        h3 { (reduced.errors.len()) " targets gave no value" }
        table.errors {
            thead { tr { th { "target" } th { "error" } } }
            tbody {
                @for (target, e) in reduced.errors.iter().take(MAX_ERRORS) {
                    tr { td { (target) } td.error { (said(e)) } }
                }
            }
        }
        @if reduced.errors.len() > MAX_ERRORS {
            p { (reduced.errors.len() - MAX_ERRORS) " more not shown" }
        }
    }
}

/// The fleet-answers form, and its answer when one was asked.
pub(crate) async fn answers_page(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    parts: &http::request::Parts,
    viewer: &RequestContext,
) -> Response<Body> {
    let base = state.console().path.as_str();
    let who = &page::Viewer::of(viewer, state);
    let (question, asked) = match Question::parse(parts.uri.query()) {
        Ok(q) => q,
        Err(why) => return page::error(400, &why, base, who),
    };
    let answer = if asked {
        let parsed = crate::pipeline::parse::Parsed::typed(vec![question.item()]);
        match crate::doors::console::target::console_item(gateway, state, viewer, parsed).await {
            Ok(v) => Some(v),
            Err(e) => return page::error(e.status, &e.message, base, who),
        }
    } else {
        None
    };
    let body = render(base, &question, answer.as_ref());
    page::respond(
        200,
        "text/html; charset=utf-8",
        page::layout("Fleet answers", base, who, body).into_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_form_becomes_the_reduced_read_a_client_would_send() {
        let (q, asked) = Question::parse(Some(
            "mbean=java.lang%3Atype%3DMemory&attribute=HeapMemoryUsage&path=used&selector=app%3Dorders&op=top&n=3",
        ))
        .unwrap();
        assert!(asked);
        assert_eq!(
            q.item().unwrap().describe(),
            json!({"type": "read", "mbean": "java.lang:type=Memory",
                   "attribute": "HeapMemoryUsage", "path": "used",
                   "target": {"url": "app=orders"}, "reduce": {"op": "top", "n": 3}})
        );
        let (q, _) = Question::parse(Some("mbean=a%3Ab%3Dc&attribute=X&op=group")).unwrap();
        let item = q.item().unwrap().describe();
        assert_eq!(item["reduce"], json!({"op": "group", "by": "value"}));
        assert_eq!(item["target"], json!({"url": "*"}));
        assert!(item.get("path").is_none());
    }

    #[test]
    fn an_empty_form_asks_nothing_and_bad_fields_are_named() {
        assert_eq!(Question::parse(None).unwrap(), (Question::default(), false));
        for (bad, names) in [
            ("op=median", "op \"median\""),
            ("n=0", "n:"),
            ("n=10001", "n:"),
            ("mbean=a%3Ab%3Dc", "attribute"),
        ] {
            let e = Question::parse(Some(bad)).unwrap_err();
            assert!(e.contains(names), "{bad}: {e}");
        }
        let long = format!("path={}", "x".repeat(MAX_FIELD + 1));
        assert!(Question::parse(Some(&long))
            .unwrap_err()
            .contains("at most"));
    }

    fn reduced(v: Value) -> Reduced {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn answers_are_read_per_op_and_per_attribute() {
        let top = reduced(
            json!({"result": [{"target": "a", "value": 5}, {"target": "b", "value": 2}],
                                  "count": 3, "errors": {}}),
        );
        let Shown::Ranked { rows, count } = &shown("top", &top)[0].1 else {
            panic!()
        };
        assert_eq!(*count, 3);
        assert_eq!(
            rows.iter()
                .map(|r| (r.label.as_str(), r.bar))
                .collect::<Vec<_>>(),
            [("a", Some(5.0)), ("b", Some(2.0))]
        );
        let max = reduced(json!({"result": {"target": "a", "value": 5}, "count": 1}));
        assert!(matches!(&shown("max", &max)[0].1, Shown::Ranked { rows, .. } if rows.len() == 1));
        let avg = reduced(json!({"result": null, "count": 0}));
        assert_eq!(
            shown("avg", &avg),
            [(
                String::new(),
                Shown::Number {
                    value: None,
                    count: 0
                }
            )]
        );
        let groups =
            reduced(json!({"result": [{"value": "17", "targets": ["a", "b"]}], "count": 2}));
        let Shown::Groups { rows, .. } = &shown("group", &groups)[0].1 else {
            panic!()
        };
        assert_eq!(
            (rows[0].value.as_str(), rows[0].detail.as_str()),
            ("2", "a, b")
        );
        let per_attribute = reduced(json!({
            "result": {"CollectionCount": {"target": "a", "mbean": "java.lang:name=Copy,type=GarbageCollector", "value": 1}},
            "count": {"CollectionCount": 4}}));
        let got = shown("max", &per_attribute);
        assert_eq!(got[0].0, "CollectionCount");
        assert!(
            matches!(&got[0].1, Shown::Ranked { rows, count: 4 } if rows[0].detail.starts_with("java.lang:name=Copy"))
        );
    }

    #[test]
    fn hostile_labels_are_escaped_and_the_chart_is_bounded() {
        let rows: Vec<Row> = (0..MAX_BARS + 10)
            .map(|i| Row {
                label: format!("<script>alert({i})</script>"),
                value: i.to_string(),
                bar: Some(i as f64),
                detail: String::new(),
            })
            .collect();
        let html = chart(&rows).into_string();
        assert!(!html.contains("<script>"));
        assert_eq!(html.matches("<rect").count(), MAX_BARS);
        assert!(html.contains("The chart shows the first"));
        // Not a number, infinite or negative: no bar drawn to scale.
        let odd = [Row {
            label: "x".into(),
            value: "-1".into(),
            bar: Some(-1.0),
            detail: String::new(),
        }];
        assert!(chart(&odd).into_string().contains("width=\"0.0\""));
    }
}
