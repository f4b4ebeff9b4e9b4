//! `jmxgate read|write|exec|search|list|version|watch`: the client from the
//! command line, against the gateway or any agent. Readable output by
//! default (tables, a tree for `list`), `--json` for scripts.
//!
//! Connection settings come from flags, then the environment
//! (`JMXGATE_URL`, `JMXGATE_USER`, `JMXGATE_PASSWORD`, `JMXGATE_TOKEN`,
//! `JMXGATE_TARGET`), then a client config file (`--client-config`, TOML:
//! `url`, `user`, `password_file`, `token_file`, `target`, `ca_file`,
//! `client_cert`, `client_key`, `timeout`). Passwords and tokens never come
//! as flags: a command line is visible to every user of the machine.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::Value;

pub mod access;
pub mod mcp_bridge;
mod render;

use crate::client::{JolokiaClient, JolokiaError, Poller};
use crate::protocol::reduce::{Op, Reduce};
use crate::protocol::Request;

#[derive(Args, Debug, Clone, Default)]
pub struct ConnectOpts {
    /// The Jolokia URL: the gateway's (`http://gw:8080/jolokia`) or an agent's.
    #[arg(long, env = "JMXGATE_URL")]
    pub url: Option<String>,
    /// HTTP Basic user; the password comes from JMXGATE_PASSWORD or --password-file.
    #[arg(long, env = "JMXGATE_USER")]
    pub user: Option<String>,
    /// A file holding the password (first line).
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    /// A file holding a bearer token (first line), instead of a user; or
    /// the token itself in JMXGATE_TOKEN.
    #[arg(long, conflicts_with = "user")]
    pub token_file: Option<PathBuf>,
    /// Proxy mode: the gateway target to address (name or URL).
    #[arg(long, env = "JMXGATE_TARGET")]
    pub target: Option<String>,
    /// PEM CA bundle for HTTPS.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) to present; needs --client-key.
    #[arg(long, requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    #[arg(long, requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// Deadline for each call [default: 30s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// A TOML file with url, user, password_file, token_file, target,
    /// ca_file, client_cert, client_key and timeout.
    #[arg(long, env = "JMXGATE_CLIENT_CONFIG")]
    pub client_config: Option<PathBuf>,
    /// Print the Jolokia answer's value as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A reduction over the targets a selector reaches (at most one).
#[derive(Args, Debug, Clone, Default)]
#[group(multiple = false)]
pub struct ReduceOpts {
    /// The N targets with the largest values.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// The N targets with the smallest values.
    #[arg(long, value_name = "N")]
    pub bottom: Option<usize>,
    /// The sum of the targets' values.
    #[arg(long)]
    pub sum: bool,
    /// The smallest value and its target.
    #[arg(long)]
    pub min: bool,
    /// The largest value and its target.
    #[arg(long)]
    pub max: bool,
    /// The mean of the targets' values.
    #[arg(long)]
    pub avg: bool,
    /// How many targets answered.
    #[arg(long)]
    pub count: bool,
    /// Each distinct value with the targets that answered it.
    #[arg(long)]
    pub group: bool,
}

impl ReduceOpts {
    fn reduce(&self) -> Option<Reduce> {
        let op = match self {
            ReduceOpts { top: Some(n), .. } => Op::Top(*n),
            ReduceOpts {
                bottom: Some(n), ..
            } => Op::Bottom(*n),
            ReduceOpts { sum: true, .. } => Op::Sum,
            ReduceOpts { min: true, .. } => Op::Min,
            ReduceOpts { max: true, .. } => Op::Max,
            ReduceOpts { avg: true, .. } => Op::Avg,
            ReduceOpts { count: true, .. } => Op::Count,
            ReduceOpts { group: true, .. } => Op::Group,
            _ => return None,
        };
        Some(Reduce::new(op))
    }
}

#[derive(Subcommand, Debug)]
pub enum ClientCmd {
    /// Read attributes: all, one, or several. With a selector as --target
    /// and one of --top, --bottom, --sum, --min, --max, --avg, --count or
    /// --group, one answer about the group instead of a value per target.
    #[command(after_help = CLIENT_HELP)]
    Read {
        mbean: String,
        attributes: Vec<String>,
        /// Inner path into the value (`used`, `map/key`).
        #[arg(long)]
        path: Option<String>,
        #[command(flatten)]
        reduce: ReduceOpts,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// Write an attribute (VALUE is JSON if it parses, else a string);
    /// prints the previous value.
    #[command(after_help = CLIENT_HELP)]
    Write {
        mbean: String,
        attribute: String,
        value: String,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// Run an operation (`name` or `name(int,java.lang.String)`).
    #[command(after_help = CLIENT_HELP)]
    Exec {
        mbean: String,
        operation: String,
        arguments: Vec<String>,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// MBean names matching a pattern (`java.lang:type=*`).
    #[command(after_help = CLIENT_HELP)]
    Search {
        pattern: String,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// The MBean tree (below an inner path such as `java.lang/type=Memory`).
    #[command(after_help = CLIENT_HELP)]
    List {
        path: Option<String>,
        /// Levels to return (maxDepth).
        #[arg(long)]
        depth: Option<u32>,
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// The agent's (or gateway's) version and protocol.
    #[command(after_help = CLIENT_HELP)]
    Version {
        #[command(flatten)]
        conn: ConnectOpts,
    },
    /// Read attributes every interval, one line per round (one bulk each);
    /// with --json, one JSON object per line.
    #[command(after_help = CLIENT_HELP)]
    Watch {
        mbean: String,
        #[arg(required = true)]
        attributes: Vec<String>,
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Stop after this many rounds.
        #[arg(long)]
        count: Option<u64>,
        #[command(flatten)]
        conn: ConnectOpts,
    },
}

/// Where the manual explains the client commands.
const CLIENT_HELP: &str = "Manual: docs/jolokia.md#from-the-command-line-and-from-rust";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ClientConfig {
    url: Option<String>,
    user: Option<String>,
    password_file: Option<PathBuf>,
    token_file: Option<PathBuf>,
    target: Option<String>,
    ca_file: Option<PathBuf>,
    client_cert: Option<PathBuf>,
    client_key: Option<PathBuf>,
    #[serde(default, with = "humantime_serde")]
    timeout: Option<Duration>,
}

/// The first line of a password (or token) file.
fn read_password(file: &std::path::Path) -> Result<String, String> {
    Ok(std::fs::read_to_string(file)
        .map_err(|e| format!("secret file {}: {e}", file.display()))?
        .lines()
        .next()
        .unwrap_or_default()
        .to_string())
}

impl ConnectOpts {
    /// A client from flags, environment and config file, in that order.
    pub fn client(&self) -> Result<JolokiaClient, String> {
        self.builder()?.build().map_err(|e| e.to_string())
    }

    /// The client's builder, from flags, environment and client config
    /// file, for a command that adds settings of its own.
    pub fn builder(&self) -> Result<crate::client::JolokiaClientBuilder, String> {
        let file: ClientConfig = match &self.client_config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("client config {}: {e}", path.display()))?;
                toml::from_str(&text)
                    .map_err(|e| format!("client config {}: {e}", path.display()))?
            }
            None => ClientConfig::default(),
        };
        let url =
            self.url.clone().or(file.url).ok_or(
                "no URL: pass --url, set JMXGATE_URL, or put url in the --client-config file",
            )?;
        let timeout = self
            .timeout
            .or(file.timeout)
            .unwrap_or(Duration::from_secs(30));
        let mut b = JolokiaClient::builder(&url).timeout(timeout);
        if let Some(user) = self.user.clone().or(file.user) {
            // Flag, then environment, then file, as for every setting.
            let password = match (&self.password_file, std::env::var("JMXGATE_PASSWORD")) {
                (Some(f), _) => read_password(f)?,
                (None, Ok(p)) => p,
                (None, Err(_)) => match &file.password_file {
                    Some(f) => read_password(f)?,
                    None => {
                        return Err(format!(
                            "user {user:?} has no password: set JMXGATE_PASSWORD, pass --password-file, or put password_file in the --client-config file"
                        ))
                    }
                },
            };
            b = b.user(&user, &password);
        }
        // A bearer token: flag, then environment, then file; never with a user.
        let token = match (&self.token_file, std::env::var("JMXGATE_TOKEN")) {
            (Some(f), _) => Some(read_password(f)?),
            (None, Ok(t)) if !t.is_empty() => Some(t),
            _ => file.token_file.as_deref().map(read_password).transpose()?,
        };
        if let Some(token) = token {
            b = b.bearer_token(token.trim());
        }
        if let Some(t) = self.target.clone().or(file.target) {
            b = b.target(&t);
        }
        if let Some(ca) = self.ca_file.clone().or(file.ca_file) {
            b = b.ca_file(ca);
        }
        let identity = match (&self.client_cert, &self.client_key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            _ => match (file.client_cert, file.client_key) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                _ => return Err(
                    "the --client-config file needs both client_cert and client_key, or neither"
                        .into(),
                ),
            },
        };
        if let Some((c, k)) = identity {
            b = b.client_cert(c, k);
        }
        Ok(b)
    }
}

/// Runs one client command; prints to stdout, errors to stderr.
pub async fn run(cmd: ClientCmd) -> ExitCode {
    match execute(cmd).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("jmxgate: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn execute(cmd: ClientCmd) -> Result<(), String> {
    let (conn, request, shape) = match cmd {
        ClientCmd::Watch {
            mbean,
            attributes,
            interval,
            count,
            conn,
        } => return watch(&conn, &mbean, &attributes, interval, count).await,
        ClientCmd::Read {
            mbean,
            attributes,
            path,
            reduce,
            conn,
        } => {
            let attrs: Vec<&str> = attributes.iter().map(String::as_str).collect();
            let mut request = match attrs.as_slice() {
                [] => Request::read(&mbean, None),
                [one] => Request::read(&mbean, Some(one)),
                many => Request::read_many(&mbean, many),
            }
            .map_err(|e| e.message)?;
            if let (Some(p), crate::protocol::Command::Read(r)) = (path, &mut request.command) {
                r.path = Some(p);
            }
            if let Some(reduce) = reduce.reduce() {
                return reduced(&conn, &request, &reduce).await;
            }
            (conn, request, Shape::Table)
        }
        ClientCmd::Write {
            mbean,
            attribute,
            value,
            conn,
        } => (
            conn,
            Request::write(&mbean, &attribute, render::parse_arg(&value)).map_err(|e| e.message)?,
            Shape::Table,
        ),
        ClientCmd::Exec {
            mbean,
            operation,
            arguments,
            conn,
        } => {
            let args = arguments.iter().map(|a| render::parse_arg(a)).collect();
            (
                conn,
                Request::exec(&mbean, &operation, args).map_err(|e| e.message)?,
                Shape::Table,
            )
        }
        ClientCmd::Search { pattern, conn } => (
            conn,
            Request::search(&pattern).map_err(|e| e.message)?,
            Shape::Lines,
        ),
        ClientCmd::List { path, depth, conn } => {
            let levels = path
                .as_deref()
                .map_or(0, |p| crate::protocol::path::split(p).len());
            let mut request = Request::list(path.as_deref());
            if let Some(d) = depth {
                request = request
                    .with_param("maxDepth", &d.to_string())
                    .map_err(|e| e.message)?;
            }
            (conn, request, Shape::Tree(levels))
        }
        ClientCmd::Version { conn } => (conn, Request::version(), Shape::Table),
    };
    let client = conn.client()?;
    let reply = client.execute(&request).await.map_err(describe)?;
    let text = if conn.json {
        pretty(&reply.value)
    } else {
        match shape {
            Shape::Table => render::table(&reply.value),
            Shape::Lines => match &reply.value {
                Value::Array(items) => items.iter().map(|v| render::scalar(v) + "\n").collect(),
                other => render::table(other),
            },
            Shape::Tree(levels) => render::tree(&reply.value, levels),
        }
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())
}

/// `--json`: the value, indented, with a final line break.
fn pretty(value: &Value) -> String {
    format!(
        "{}\n",
        serde_json::to_string_pretty(value).expect("JSON value")
    )
}

/// A reduced read: the result as a table (with `--json`, the answer's
/// value), then the targets that gave nothing usable, on stderr.
async fn reduced(conn: &ConnectOpts, request: &Request, reduce: &Reduce) -> Result<(), String> {
    let client = conn.client()?;
    let answer = client.reduce(request, reduce).await.map_err(describe)?;
    let text = if conn.json {
        pretty(&serde_json::to_value(&answer).expect("JSON value"))
    } else {
        render::reduced(&answer, reduce.op)
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    if !conn.json && !answer.errors.is_empty() {
        eprintln!("{} target(s) gave no usable value:", answer.errors.len());
        for (target, e) in &answer.errors {
            eprintln!(
                "  {target}: {}",
                e.error.as_deref().unwrap_or("(no message)")
            );
        }
    }
    Ok(())
}

/// One `watch --json` line: `{"time":…,"values":{…}}`, with `"errors"`
/// by attribute when some reads failed.
fn watch_json(
    time: &str,
    round: &std::collections::BTreeMap<String, Result<Value, String>>,
) -> Value {
    let values: serde_json::Map<String, Value> = round
        .iter()
        .filter_map(|(a, r)| Some((a.clone(), r.as_ref().ok()?.clone())))
        .collect();
    let errors: serde_json::Map<String, Value> = round
        .iter()
        .filter_map(|(a, r)| Some((a.clone(), Value::String(r.as_ref().err()?.clone()))))
        .collect();
    let mut line = serde_json::json!({"time": time, "values": values});
    if !errors.is_empty() {
        line["errors"] = Value::Object(errors);
    }
    line
}

enum Shape {
    Table,
    Lines,
    Tree(usize),
}

fn describe(e: JolokiaError) -> String {
    match e {
        JolokiaError::Remote(r) if r.status == 404 => format!("not found: {}", r.message),
        JolokiaError::Remote(r) if r.status == 403 => format!("forbidden: {}", r.message),
        other => other.to_string(),
    }
}

async fn watch(
    conn: &ConnectOpts,
    mbean: &str,
    attributes: &[String],
    interval: Duration,
    count: Option<u64>,
) -> Result<(), String> {
    if let Some(dup) = attributes
        .iter()
        .enumerate()
        .find_map(|(i, a)| attributes[..i].contains(a).then_some(a))
    {
        return Err(format!("attribute {dup:?} is given twice"));
    }
    let client = conn.client()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut poller = Poller::new(client);
    for attribute in attributes {
        let request = Request::read(mbean, Some(attribute)).map_err(|e| e.message)?;
        let tx = tx.clone();
        let name = attribute.clone();
        poller.register(request, move |answer| {
            let _ = tx.send((name.clone(), answer));
        });
    }
    poller.start(interval);
    let mut round = std::collections::BTreeMap::new();
    let mut rounds = 0;
    let mut failures = 0;
    while let Some((name, answer)) = rx.recv().await {
        if answer.is_err() {
            failures += 1;
        }
        round.insert(name, answer.map(|r| r.value).map_err(describe));
        if round.len() < attributes.len() {
            continue;
        }
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        if conn.json {
            println!("{}", watch_json(&now, &round));
        } else {
            let line: Vec<String> = attributes
                .iter()
                .map(|a| match &round[a] {
                    Ok(v) => format!("{a}={}", render::scalar(v)),
                    Err(e) => format!("{a}=<{e}>"),
                })
                .collect();
            println!("{now}  {}", line.join("  "));
        }
        round.clear();
        rounds += 1;
        if count.is_some_and(|c| rounds >= c) {
            break;
        }
    }
    poller.stop();
    if failures > 0 && count.is_some() {
        return Err(format!("{failures} reads failed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn watch_lines_in_json_keep_values_and_errors_apart() {
        let round = std::collections::BTreeMap::from([
            ("A".to_string(), Ok(json!(1))),
            ("B".to_string(), Err("not found: B".to_string())),
        ]);
        assert_eq!(
            watch_json("2026-01-01T00:00:00Z", &round),
            json!({"time": "2026-01-01T00:00:00Z", "values": {"A": 1}, "errors": {"B": "not found: B"}})
        );
    }

    #[test]
    fn watch_lines_without_errors_have_no_errors_key() {
        let round = std::collections::BTreeMap::from([("A".to_string(), Ok(json!("x")))]);
        assert!(watch_json("t", &round).get("errors").is_none());
    }
}
