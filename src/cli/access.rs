//! `jmxgate access request|list|show|approve|deny|revoke`: the
//! access-requests API of a gateway, from a shell. It decides nothing
//! itself; the gateway's answers (and refusals) are printed as they are.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::{json, Value};

use super::ConnectOpts;

/// Where the manual explains just-in-time access.
pub const ACCESS_HELP: &str = "Manual: docs/access-control.md#just-in-time-access-and-four-eyes";

/// Where the API lives below the gateway's origin.
const PATH: &str = "/jmxgate/access/requests";

#[derive(Subcommand, Debug)]
pub enum AccessCmd {
    /// Ask for a role for a while (a reviewer approves it).
    #[command(after_help = ACCESS_HELP)]
    Request {
        /// The role, e.g. ops.
        role: String,
        /// How long, e.g. 30m (at most the role's max_duration).
        #[arg(long, value_parser = humantime::parse_duration)]
        duration: Duration,
        /// Only some of the role's targets: a name, glob or label selector.
        #[arg(long = "on", value_name = "SELECTOR")]
        targets: Option<String>,
        /// Why (roles may require it), e.g. a ticket.
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// Your requests, and those you may review.
    #[command(after_help = ACCESS_HELP)]
    List {
        /// Only those in this state.
        #[arg(long, value_parser = ["pending", "approved", "denied", "expired", "revoked"])]
        state: Option<String>,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// One request, with its reviews.
    #[command(after_help = ACCESS_HELP)]
    Show {
        id: String,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// Approve a request (not your own; you need an approver role).
    #[command(after_help = ACCESS_HELP)]
    Approve {
        id: String,
        #[arg(long)]
        comment: Option<String>,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// Deny a request.
    #[command(after_help = ACCESS_HELP)]
    Deny {
        id: String,
        #[arg(long)]
        comment: Option<String>,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// End a pending request or a grant now (yours, or as an approver).
    #[command(after_help = ACCESS_HELP)]
    Revoke {
        id: String,
        #[command(flatten)]
        conn: ConnectOpts,
    },
}

pub async fn run(cmd: AccessCmd) -> ExitCode {
    match execute(cmd).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("jmxgate access: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The API's URL at the gateway the connection options name (its origin,
/// whatever path was given for the Jolokia endpoint).
pub fn api_url(given: &str, tail: &str) -> Result<String, String> {
    let mut url = url::Url::parse(given).map_err(|e| format!("url {given:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "url {given:?}: only http:// and https:// are supported"
        ));
    }
    url.set_path(&format!("{PATH}{tail}"));
    url.set_query(None);
    Ok(url.to_string())
}

async fn execute(cmd: AccessCmd) -> Result<(), String> {
    let (conn, method, tail, body) = match cmd {
        AccessCmd::Request {
            role,
            duration,
            targets,
            reason,
            conn,
        } => {
            let mut body = json!({
                "role": role,
                "duration": humantime::format_duration(duration).to_string(),
            });
            if let Some(t) = targets {
                body["targets"] = json!(t);
            }
            if let Some(r) = reason {
                body["reason"] = json!(r);
            }
            (conn, reqwest::Method::POST, String::new(), Some(body))
        }
        AccessCmd::List { state, conn } => {
            let tail = state.map_or(String::new(), |s| format!("?state={s}"));
            (conn, reqwest::Method::GET, tail, None)
        }
        AccessCmd::Show { id, conn } => (conn, reqwest::Method::GET, format!("/{id}"), None),
        AccessCmd::Approve { id, comment, conn } => (
            conn,
            reqwest::Method::POST,
            format!("/{id}/approve"),
            Some(json!({ "comment": comment })),
        ),
        AccessCmd::Deny { id, comment, conn } => (
            conn,
            reqwest::Method::POST,
            format!("/{id}/deny"),
            Some(json!({ "comment": comment })),
        ),
        AccessCmd::Revoke { id, conn } => (
            conn,
            reqwest::Method::POST,
            format!("/{id}/revoke"),
            Some(json!({})),
        ),
    };
    let json_out = conn.json;
    // Credentials, TLS and timeouts as for every client command; a
    // redirect to another origin is never followed.
    let client = conn
        .builder()?
        .same_origin_redirects_only()
        .build()
        .map_err(|e| e.to_string())?;
    let (path, query) = tail
        .split_once('?')
        .map_or((tail.as_str(), None), |(p, q)| (p, Some(q)));
    let mut url = api_url(client.url().as_str(), path)?;
    if let Some(q) = query {
        url = format!("{url}?{q}");
    }
    let (http, authorization) = client.http_and_authorization();
    let mut req = http.request(method, &url);
    if let Some(a) = authorization {
        req = req.header(http::header::AUTHORIZATION, a);
    }
    if let Some(b) = body {
        req = req
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(b.to_string());
    }
    let answer = req
        .send()
        .await
        // Without the URL: it may carry a user name.
        .map_err(|e| format!("cannot reach the gateway: {}", e.without_url()))?;
    let status = answer.status();
    let text = answer.text().await.map_err(|e| e.to_string())?;
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if !status.is_success() {
        let why = value["error"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string());
        return Err(format!("{} {}", status.as_u16(), why));
    }
    if json_out {
        println!("{}", serde_json::to_string_pretty(&value).expect("JSON"));
    } else if let Some(list) = value["requests"].as_array() {
        print!("{}", table(list));
    } else {
        print!("{}", one(&value));
    }
    Ok(())
}

/// Requests as a table: one line each.
fn table(requests: &[Value]) -> String {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("-").to_string();
    let rows: Vec<[String; 7]> = requests
        .iter()
        .map(|r| {
            let what = match r.get("item") {
                Some(item) => format!(
                    "{}: {}",
                    s(r, "targets"),
                    crate::doors::access::wire::item_words(item)
                ),
                None => s(r, "targets"),
            };
            let review = if r["may_review"] == true { "yes" } else { "" };
            [
                s(r, "id"),
                s(r, "state"),
                s(r, "requester"),
                s(r, "role"),
                what,
                format!("{}/{}", r["approvals"], r["approvals_needed"]),
                review.to_string(),
            ]
        })
        .collect();
    let header = [
        "ID",
        "STATE",
        "REQUESTER",
        "ROLE",
        "ON",
        "APPROVALS",
        "YOU MAY REVIEW",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        out.truncate(out.trim_end().len());
        out + "\n"
    };
    let mut out = line(header.to_vec());
    for row in &rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// One request, field by field.
fn one(r: &Value) -> String {
    let mut out = String::new();
    let item = r.get("item");
    for key in [
        "id",
        "state",
        "kind",
        "requester",
        "role",
        if item.is_some() { "target" } else { "targets" },
        "duration",
        "reason",
        "created",
        "decided",
        "expires",
        "used",
        "ended_by",
    ] {
        // An item's target is its request's one target.
        let field = if key == "target" { "targets" } else { key };
        if let Some(v) = r.get(field).and_then(Value::as_str) {
            out += &format!("{key:<10} {v}\n");
        }
    }
    if let Some(item) = item {
        out += &format!(
            "{:<10} {}\n",
            "item",
            crate::doors::access::wire::item_words(item)
        );
        for key in ["value", "arguments"] {
            if let Some(v) = item.get(key) {
                out += &format!("{key:<10} {v}\n");
            }
        }
    }
    out += &format!(
        "{:<10} {} of {}\n",
        "approvals", r["approvals"], r["approvals_needed"]
    );
    for v in r["reviews"].as_array().into_iter().flatten() {
        out += &format!(
            "{:<10} {} {} at {}{}\n",
            "review",
            v["reviewer"].as_str().unwrap_or("-"),
            v["verdict"].as_str().unwrap_or("-"),
            v["at"].as_str().unwrap_or("-"),
            v["comment"]
                .as_str()
                .map_or(String::new(), |c| format!(": {c}"))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_is_found_at_the_gateways_origin() {
        assert_eq!(
            api_url("https://gw:8443/jolokia", "/ar-01/approve").unwrap(),
            "https://gw:8443/jmxgate/access/requests/ar-01/approve"
        );
        assert_eq!(
            api_url("http://gw:8080/", "").unwrap(),
            "http://gw:8080/jmxgate/access/requests"
        );
        assert!(api_url("ftp://gw/", "").is_err());
    }

    #[test]
    fn an_item_request_names_its_target_and_the_item_in_words() {
        let r = json!({
            "id": "ar-02", "state": "pending", "kind": "item", "requester": "dev", "role": "ops",
            "targets": "orders-1", "approvals": 0, "approvals_needed": 1, "may_review": false,
            "item": {"type": "exec", "mbean": "java.lang:type=Memory", "operation": "gc", "arguments": []},
        });
        let text = table(std::slice::from_ref(&r));
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .contains("orders-1: exec java.lang:type=Memory gc"),
            "{text}"
        );
        let shown = one(&r);
        assert!(shown.contains("target     orders-1\n"), "{shown}");
        assert!(
            shown.contains("item       exec java.lang:type=Memory gc\n"),
            "{shown}"
        );
        assert!(shown.contains("arguments  []\n"), "{shown}");
        assert!(!shown.contains('{'), "{shown}");
    }

    #[test]
    fn a_listing_is_a_table_a_person_reads() {
        let text = table(&[json!({
            "id": "ar-01", "state": "pending", "requester": "dev", "role": "ops",
            "targets": "orders-*", "approvals": 0, "approvals_needed": 2, "may_review": true,
        })]);
        assert_eq!(
            text,
            "ID     STATE    REQUESTER  ROLE  ON        APPROVALS  YOU MAY REVIEW\n\
             ar-01  pending  dev        ops   orders-*  0/2        yes\n"
        );
    }
}
