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

/// One item run as the viewer, audited; its answer as JSON.
pub(crate) async fn console_item(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    parsed: parse::Parsed,
) -> Result<Value, HttpError> {
    console_item_as(gateway, state, viewer, "GET", parsed).await
}

/// [`console_item`] judged as sent with `method` (`POST` for a form's
/// write or operation: what a policy's `<http>` says of it).
pub(crate) async fn console_item_as(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    method: &'static str,
    parsed: parse::Parsed,
) -> Result<Value, HttpError> {
    let answers = console_items(gateway, state, viewer, method, parsed).await?;
    Ok(answers.into_iter().next().expect("one item, one answer"))
}

/// Several items run as the viewer as one bulk, audited in their order;
/// their answers as JSON, in that order.
pub(crate) async fn console_items(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    method: &'static str,
    parsed: parse::Parsed,
) -> Result<Vec<Value>, HttpError> {
    let started = std::time::Instant::now();
    let caller = viewer
        .caller(method)
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
    // An agent's value may nest deeper than a JSON tree is built here:
    // an error page, never a panic.
    merged
        .into_iter()
        .map(|(answer, _)| {
            answer.into_value().map_err(|e| {
                HttpError::new(
                    502,
                    "jmxgate.AnswerTooDeep",
                    format!("the answer nests too deep: {e}"),
                )
            })
        })
        .collect()
}

/// Whether the viewer's roles would let `request` run on `target`, sent
/// with `method`: the route and authorize phases' own answer, nothing
/// sent to the agent.
fn console_may(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    target: &str,
    method: &'static str,
    request: Result<Request, crate::protocol::ProtocolError>,
) -> bool {
    let Ok(request) = request else {
        return false;
    };
    let parsed = parse::Parsed::typed(vec![Ok(parse::ParsedItem::to(target, request))]);
    let caller = viewer.caller(method).without_origin();
    let addressing = route::Addressing::Proxy {
        default_target: None,
    };
    matches!(
        gateway.judge(state, &caller, addressing, &parsed.items[0]),
        crate::pipeline::Judged::Agent { .. }
    )
}

/// Whether the viewer may run `operation` on the MBean (as a form posts it).
pub(crate) fn console_may_run(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    target: &str,
    mbean: &str,
    operation: &str,
) -> bool {
    let exec = Request::exec(mbean, operation, Vec::new());
    console_may(gateway, state, viewer, target, "POST", exec)
}

/// Whether the viewer may read `attribute` of the MBean.
pub(crate) fn console_may_read(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    target: &str,
    mbean: &str,
    attribute: &str,
) -> bool {
    let read = Request::read(mbean, Some(attribute));
    console_may(gateway, state, viewer, target, "GET", read)
}

/// Whether the viewer may write `attribute` of the MBean (as a form posts it).
pub(crate) fn console_may_write(
    gateway: &Gateway,
    state: &crate::pipeline::state::State,
    viewer: &RequestContext,
    target: &str,
    mbean: &str,
    attribute: &str,
) -> bool {
    let write = Request::write(mbean, attribute, Value::Null);
    console_may(gateway, state, viewer, target, "POST", write)
}

/// "Open in Hawtio": where it goes, and whether that Hawtio is elsewhere
/// (its connections are imported from the console).
pub(crate) struct Hawtio<'a> {
    pub href: &'a str,
    pub elsewhere: bool,
}

/// What a form of the page did: what was asked, the answer (or why it was
/// not sent), and the fields to fill the same form with again.
pub(crate) struct Done {
    pub asked: String,
    /// A write (its answer is the value before), not an operation.
    pub wrote: bool,
    /// The form it came from (`actions::kept`).
    pub form: String,
    pub kept: serde_json::Map<String, Value>,
    pub answer: Result<Value, String>,
}

/// What may be done on the MBean shown: run an operation, write an
/// attribute (each judged as the viewer), with the page's form token.
pub(crate) struct Changes<'a> {
    pub may_run: &'a dyn Fn(&str) -> bool,
    pub may_write: &'a dyn Fn(&str) -> bool,
    pub token: &'a str,
    pub done: Option<&'a Done>,
}

/// The page's body: the target's header, the MBean tree, and the chosen
/// MBean's detail with its forms.
pub(crate) fn render(
    base: &str,
    target: &crate::fleet::TargetView<'_>,
    trend: Markup,
    list: &Value,
    mbean: Option<(&str, &Value)>,
    changes: &Changes<'_>,
    hawtio: Option<Hawtio<'_>>,
) -> Markup {
    let name = target.name;
    let href = |mbean: &str| {
        let q: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("mbean", mbean)
            .finish();
        format!("{base}/targets/{}?{q}", encode(name))
    };
    // Sorted: an agent lists domains and MBeans in no useful order.
    let mut domains: Vec<(&String, Vec<&String>)> = list["value"]
        .as_object()
        .map(|d| {
            d.iter()
                .map(|(domain, beans)| {
                    let mut keys: Vec<&String> = beans
                        .as_object()
                        .map(|b| b.keys().collect())
                        .unwrap_or_default();
                    keys.sort();
                    (domain, keys)
                })
                .collect()
        })
        .unwrap_or_default();
    domains.sort_by(|a, b| a.0.cmp(b.0));
    let mut shown = 0usize;
    let mut left_out = 0usize;
    let few = domains.len() < 8;
    html! {
        p {
            a href={ (base) "/" } { "The fleet" } " › " strong { (name) }
            @if let Some(h) = &hawtio {
                " " a.hawtio href=(h.href) target="_blank" rel="noopener" { "Open in Hawtio" }
            }
        }
        (header(target))
        (trend)
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
        div.target-body {
        div.tree {
            @for (domain, keys) in &domains {
                details open[few || mbean.is_some_and(|(m, _)| m.starts_with(&format!("{domain}:")))] {
                    summary { (domain) }
                    ul {
                        @for key in keys {
                            @if shown < MAX_MBEANS {
                                @let mbean_name = format!("{domain}:{key}");
                                li { a href=(href(&mbean_name)) { (key) } }
                                ({ shown += 1; "" })
                            } @else {
                                ({ left_out += 1; "" })
                            }
                        }
                    }
                }
            }
            @if left_out > 0 {
                p { (left_out) " more MBeans not shown" }
            }
        }
        @if let Some((mbean_name, read)) = mbean {
            (detail(base, name, mbean_name, read, list, changes))
        }
        }
    }
}

/// The target as the gateway knows it: health, breaker, agent, labels,
/// latency, the last error.
fn header(t: &crate::fleet::TargetView<'_>) -> Markup {
    let h = &t.health;
    html! {
        dl class={ "target-header " (h.state) } {
            dt { "state" } dd.state { (h.state) }
            dt { "breaker" } dd { (h.breaker)
                @if h.consecutive_failures > 0 { " (" (h.consecutive_failures) " failures in a row)" } }
            dt { "agent" } dd {
                (t.agent.version.as_deref().unwrap_or("not yet known"))
                @if let Some(p) = &t.agent.protocol { " · protocol " (p) }
            }
            dt { "latency" } dd { (h.latency_ms.map(|l| format!("{l:.1} ms")).unwrap_or_else(|| "-".into())) }
            dt { "last checked" } dd { (h.last_check.as_deref().unwrap_or("not yet")) }
            @if let Some(e) = &h.last_error { dt { "last error" } dd.error { (e) } }
            dt { "labels" } dd.labels {
                @for (k, v) in t.labels.iter() { span.label { (k) "=" (v) } " " }
            }
        }
    }
}

/// One MBean: its attributes' values as read (writable ones with a form
/// where the viewer may write them), and its operations (a form for each
/// the viewer may run).
fn detail(
    base: &str,
    target: &str,
    name: &str,
    read: &Value,
    list: &Value,
    changes: &Changes<'_>,
) -> Markup {
    let (domain, key) = name.split_once(':').unwrap_or((name, ""));
    let info = &list["value"][domain][key];
    let action = format!("{base}/targets/{}", encode(target));
    let mut attributes: Vec<(&String, &Value)> = info["attr"]
        .as_object()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    attributes.sort_by(|a, b| a.0.cmp(b.0));
    let mut operations: Vec<(&String, &Value)> = info["op"]
        .as_object()
        .map(|o| o.iter().collect())
        .unwrap_or_default();
    operations.sort_by(|a, b| a.0.cmp(b.0));
    let kept = |form: &str, field: &str| -> String {
        changes
            .done
            .filter(|d| d.form == form)
            .and_then(|d| d.kept.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let hidden = |act: &str| {
        html! {
            input type="hidden" name=(super::forms::FIELD) value=(changes.token);
            input type="hidden" name="action" value=(act);
            input type="hidden" name="mbean" value=(name);
        }
    };
    html! {
        section.mbean {
            h2 { (name) }
            @if let Some(done) = changes.done {
                (outcome(done))
            }
            @if read["status"] != 200 {
                p.error { (read["error"].as_str().unwrap_or("not read")) }
            }
            table.attributes {
                thead { tr { th { "attribute" } th { "value" } th { "type" } th { "set" } } }
                tbody {
                    @for (attribute, meta) in &attributes {
                        tr {
                            td { (attribute) }
                            td.value { (super::values::cell(attribute, &read["value"][attribute.as_str()])) }
                            td { (meta["type"].as_str().unwrap_or("")) }
                            td {
                                @if meta["rw"] == true && (changes.may_write)(attribute) {
                                    @let form = format!("write:{attribute}");
                                    form.write method="post" action=(action) {
                                        (hidden("write"))
                                        input type="hidden" name="attribute" value=(attribute);
                                        input type="text" name="value" value=(kept(&form, "value"))
                                            placeholder=(meta["type"].as_str().unwrap_or("value"))
                                            aria-label={ "new value of " (attribute) };
                                        button type="submit" { "Set" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !operations.is_empty() {
                h3 { "Operations" }
                ul.operations {
                    @for (operation, meta) in &operations {
                        @let allowed = (changes.may_run)(operation);
                        @for (i, overload) in super::actions::overloads(meta).into_iter().enumerate() {
                            li class=(if allowed { "may-run" } else { "denied" }) {
                                code { (operation) } " " (signature(overload)) " "
                                @if allowed {
                                    @let form = format!("exec:{operation}:{i}");
                                    form.exec method="post" action=(action) {
                                        (hidden("exec"))
                                        input type="hidden" name="operation" value=(operation);
                                        input type="hidden" name="overload" value=(i);
                                        @for (j, arg) in overload["args"].as_array().into_iter().flatten().enumerate() {
                                            @let field = super::actions::argument_field(j);
                                            label {
                                                (arg["name"].as_str().unwrap_or("arg")) " "
                                                input type="text" name=(field) value=(kept(&form, &field))
                                                    placeholder=(arg["type"].as_str().unwrap_or(""));
                                            }
                                        }
                                        button type="submit" { "Run" }
                                    }
                                } @else {
                                    span.not-allowed { "not allowed to you" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What a form did: the answer's value, its error, or why it was not sent
/// (an item that waits for approval names its access request).
fn outcome(done: &Done) -> Markup {
    html! {
        div.outcome {
            @match &done.answer {
                Ok(answer) if answer["status"] == 200 => {
                    p.ok { (done.asked) ": done" }
                    @if !answer["value"].is_null() {
                        div.value {
                            span.said { (if done.wrote { "it was " } else { "it returned " }) }
                            (super::values::cell("result", &answer["value"]))
                        }
                    }
                }
                Ok(answer) if answer["error_type"] == crate::pipeline::authorize::approval::APPROVAL_REQUIRED => {
                    p.waits {
                        (done.asked) ": " (answer["error"].as_str().unwrap_or("needs approval"))
                    }
                    p.note { "Once a reviewer has approved it, press the same button again with the same values." }
                }
                Ok(answer) => p.error {
                    (done.asked) ": " (answer["error"].as_str().unwrap_or("failed"))
                },
                Err(why) => p.error { (done.asked) ": " (why) },
            }
        }
    }
}

fn signature(overload: &Value) -> String {
    let args: Vec<String> = overload["args"]
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
        overload["ret"].as_str().unwrap_or("void")
    )
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
