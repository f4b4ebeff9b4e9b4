//! One target's page: its MBeans as the caller's policy lets them be
//! listed, and one MBean's attributes and operations. Every read goes
//! through the shared phases as the viewer (parse, route, authorize,
//! dispatch, merge) and is audited like any item (`"channel":"console"`).

use crate::pipeline::RequestContext;
use maud::{html, Markup};
use serde_json::Value;

use crate::pipeline::{parse, route, Gateway, HttpError};
use crate::protocol::Request;

/// MBeans shown on a target's page; past it, the rest are counted.
const MAX_MBEANS: usize = 2000;
/// Characters of one attribute's value shown.
const MAX_VALUE_CHARS: usize = 2000;

/// One item run as the viewer, audited; its answer as JSON.
pub(crate) async fn console_item(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    parsed: parse::Parsed,
) -> Result<Value, HttpError> {
    let started = std::time::Instant::now();
    let caller = viewer
        .caller("GET")
        .without_origin()
        .reads_denied_in_place();
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    let local =
        |command: &crate::protocol::Command| gateway.answer_locally(state, viewer, command, None);
    let ((), merged) = gateway
        .run_items(state, &caller, addressing, &parsed, local, |_| {
            Ok::<_, HttpError>(())
        })
        .await?;
    // The item's own latency: a page runs several.
    let mut who = viewer.who();
    who.latency = started.elapsed();
    gateway
        .record(crate::pipeline::audit::Event::Items {
            who: &who,
            state,
            parsed: &parsed,
            merged: &merged,
        })
        .await?;
    let (answer, _) = merged.into_iter().next().expect("one item, one answer");
    // An agent's value may nest deeper than a JSON tree is built here:
    // an error page, never a panic.
    answer.into_value().map_err(|e| {
        HttpError::new(
            502,
            "jmxgate.AnswerTooDeep",
            format!("the answer nests too deep: {e}"),
        )
    })
}

/// Whether the viewer's roles would let it run `operation` on the
/// MBean: the route and authorize phases' own answer, nothing sent.
pub(crate) fn console_may_run(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    target: &str,
    mbean: &str,
    operation: &str,
) -> bool {
    let Ok(exec) = Request::exec(mbean, operation, Vec::new()) else {
        return false;
    };
    let parsed = parse::Parsed::typed(vec![Ok(parse::ParsedItem::to(target, exec))]);
    let caller = viewer
        .caller("POST")
        .without_origin()
        .reads_denied_in_place();
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    matches!(
        gateway.judge(state, &caller, addressing, &parsed.items[0]),
        crate::pipeline::Judged::Agent { .. }
    )
}

/// "Open in Hawtio": where it goes, and whether that Hawtio is elsewhere
/// (its connections are imported from the console).
pub(crate) struct Hawtio<'a> {
    pub href: &'a str,
    pub elsewhere: bool,
}

/// The page's body: the MBean tree, and the chosen MBean's detail;
/// `may_run` says which of its operations the viewer may run.
pub(crate) fn render(
    base: &str,
    target: &str,
    list: &Value,
    mbean: Option<(&str, &Value)>,
    may_run: &dyn Fn(&str) -> bool,
    hawtio: Option<Hawtio<'_>>,
) -> Markup {
    let href = |name: &str| {
        let q: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("mbean", name)
            .finish();
        format!("{base}/targets/{}?{q}", encode(target))
    };
    let mut shown = 0usize;
    let mut left_out = 0usize;
    html! {
        p {
            a href={ (base) "/" } { "The fleet" } " › " strong { (target) }
            @if let Some(h) = &hawtio {
                " " a.hawtio href=(h.href) target="_blank" rel="noopener" { "Open in Hawtio" }
            }
        }
        @if let Some(Hawtio { elsewhere: true, .. }) = &hawtio {
            p.note {
                "That Hawtio opens the connection named after this target. Import yours once "
                "(its Connect page, Import connections): "
                a href={ (base) (super::config::HAWTIO_CONNECTIONS) } { "your targets as Hawtio connections" } "."
            }
        }
        @if list["status"] != 200 {
            p.error { "The MBeans could not be listed: " (list["error"].as_str().unwrap_or("no answer")) }
        }
        div.tree {
            @if let Some(domains) = list["value"].as_object() {
                @for (domain, beans) in domains {
                    details open[domains.len() < 8] {
                        summary { (domain) }
                        ul {
                            @if let Some(beans) = beans.as_object() {
                                @for key in beans.keys() {
                                    @if shown < MAX_MBEANS {
                                        @let name = format!("{domain}:{key}");
                                        li { a href=(href(&name)) { (key) } }
                                        ({ shown += 1; "" })
                                    } @else {
                                        ({ left_out += 1; "" })
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if left_out > 0 {
                p { (left_out) " more MBeans not shown" }
            }
        }
        @if let Some((name, read)) = mbean {
            (detail(name, read, list, may_run))
        }
    }
}

/// One MBean: its attributes' values as read, and the operations the
/// list shows the caller.
fn detail(name: &str, read: &Value, list: &Value, may_run: &dyn Fn(&str) -> bool) -> Markup {
    let (domain, key) = name.split_once(':').unwrap_or((name, ""));
    let info = &list["value"][domain][key];
    html! {
        section.mbean {
            h2 { (name) }
            @if read["status"] != 200 {
                p.error { (read["error"].as_str().unwrap_or("not read")) }
            }
            table.attributes {
                thead { tr { th { "attribute" } th { "value" } th { "type" } } }
                tbody {
                    @if let Some(attributes) = info["attr"].as_object() {
                        @for (attribute, meta) in attributes {
                            tr {
                                td { (attribute) }
                                td.value { (shown_value(&read["value"][attribute])) }
                                td { (meta["type"].as_str().unwrap_or("")) }
                            }
                        }
                    }
                }
            }
            @if let Some(operations) = info["op"].as_object() {
                h3 { "Operations" }
                ul.operations {
                    @for (operation, meta) in operations {
                        @let allowed = may_run(operation);
                        li class=(if allowed { "may-run" } else { "denied" }) {
                            code { (operation) } " " (signature(meta)) " "
                            @if allowed { span.allowed { "you may run it" } }
                            @else { span.not-allowed { "not allowed to you" } }
                        }
                    }
                }
            }
        }
    }
}

fn signature(meta: &Value) -> String {
    let one = |m: &Value| {
        let args: Vec<String> = m["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x["type"].as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default();
        format!(
            "({}) → {}",
            args.join(", "),
            m["ret"].as_str().unwrap_or("void")
        )
    };
    match meta {
        Value::Array(overloads) => overloads.iter().map(one).collect::<Vec<_>>().join("; "),
        m => one(m),
    }
}

fn shown_value(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    if text.chars().count() > MAX_VALUE_CHARS {
        let cut: String = text.chars().take(MAX_VALUE_CHARS).collect();
        format!("{cut}… (cut)")
    } else {
        text
    }
}

/// A target name as one path segment.
pub(crate) fn encode(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The items the page needs: the target's list, and a read of the MBean.
/// The list of a target's MBeans.
pub(crate) fn list_item(target: &str) -> parse::Parsed {
    parse::Parsed::typed(vec![Ok(parse::ParsedItem::to(target, Request::list(None)))])
}

/// A read of all of an MBean's attributes, each failing alone.
pub(crate) fn read_item(target: &str, mbean: &str) -> parse::Parsed {
    let read = Request::read(mbean, None).and_then(|r| r.with_param("ignoreErrors", "true"));
    parse::Parsed::typed(vec![read.map(|r| parse::ParsedItem::to(target, r))])
}
