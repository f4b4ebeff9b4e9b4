//! A hostile (or just broken) Jolokia agent: a small HTTP/1.1 server of
//! our own that answers what no real agent would. The first segment of the
//! URL path picks the behaviour, so one server stands behind several
//! targets: `http://127.0.0.1:PORT/<behaviour>/jolokia`.
//!
//! Each connection runs on its own thread; the bytes written on each are
//! counted, so a test can tell how much of an endless body the gateway
//! took before it hung up.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// What the agent answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Behaviour {
    /// HTTP 400, text/plain, a chunked body that never ends.
    Endless400,
    /// HTTP 200, JSON, a chunked body that never ends.
    Endless200,
    /// HTTP 200 claiming a 10 GB `Content-Length`, then never-ending bytes.
    LyingLength,
    /// A well-formed bulk answer whose values nest 300 arrays deep.
    Deep,
    /// Answers with the wrong types: `"status":"200"`, a text timestamp, a
    /// number for `error_type`, a string for `request`.
    WrongTypes,
    /// An HTML page with status 200.
    NotJson,
    /// A JSON array with fewer answers than requests.
    Short,
    /// Nothing for 30 seconds, then a well-formed answer.
    Slow,
    /// Not HTTP at all.
    Garbage,
    /// Well-formed answers about MBeans whose values a scrape must bound:
    /// a composite attribute nested [`NESTING`] deep, each level's keys
    /// long, every leaf's name made of the whole path.
    DeepComposite,
    /// [`LONG_NAMES`] MBeans with names of [`LONG_NAME`] bytes.
    LongNames,
    /// An MBean with `target` and `exported_target` keys of its own, and
    /// one at `jmx:type=scrape` whose `error` is 736: names a scrape's
    /// answer gives to the gateway's own labels and families.
    OwnNames,
    /// As Jolokia 2.6.0 with Tomcat's `Catalina:type=Server`: a read of
    /// several attributes fails whole (status 500) when it includes one
    /// the agent can't serialise (`broken`); each other attribute read
    /// alone answers. Counts the reads that named `broken`.
    BrokenBean,
    /// Markup where a page would show it: an MBean named
    /// `evil:type=<script>…</script>` whose attribute's value is an
    /// `<img onerror>`, for pages that must keep them text.
    Markup,
    /// Values of the wrong shape for OpenTelemetry rules: at
    /// `shifty:type=Values`, `Count` (declared `java.lang.Object`) a
    /// number on one read and text on the next, `Shape` (declared `long`)
    /// an object, beside a well-behaved `Fine` and a `State` text; at
    /// `shifty:type=Array`, a read whose value is an array, not the
    /// object of its attributes.
    Shifty,
}

/// How many reads [`Behaviour::Shifty`]'s `Values` has answered (`Count`
/// is a number on even ones, text on odd ones).
pub static SHIFTY_READS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// [`Behaviour::Markup`]'s MBean and its attribute's value.
pub const MARKUP_MBEAN: &str = "evil:type=<script>alert(1)</script>";
pub const MARKUP_VALUE: &str = "<img src=x onerror=alert(2)>";

/// How many reads [`Behaviour::BrokenBean`] was sent that named `broken`.
pub static BROKEN_READS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How deep [`Behaviour::DeepComposite`] nests its composite, and how
/// many items and key bytes each level has.
pub const NESTING: usize = 60;
pub const NESTED_ITEMS: usize = 8;
pub const NESTED_KEY: usize = 30;
/// How many MBeans [`Behaviour::LongNames`] has, and their names' bytes.
pub const LONG_NAMES: usize = 100;
pub const LONG_NAME: usize = 6000;

impl Behaviour {
    pub const ALL: [Behaviour; 9] = [
        Behaviour::Endless400,
        Behaviour::Endless200,
        Behaviour::LyingLength,
        Behaviour::Deep,
        Behaviour::WrongTypes,
        Behaviour::NotJson,
        Behaviour::Short,
        Behaviour::Slow,
        Behaviour::Garbage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Behaviour::Endless400 => "endless-400",
            Behaviour::Endless200 => "endless-200",
            Behaviour::LyingLength => "lying-length",
            Behaviour::Deep => "deep",
            Behaviour::WrongTypes => "wrong-types",
            Behaviour::NotJson => "not-json",
            Behaviour::Short => "short",
            Behaviour::Slow => "slow",
            Behaviour::Garbage => "garbage",
            Behaviour::DeepComposite => "deep-composite",
            Behaviour::LongNames => "long-names",
            Behaviour::OwnNames => "own-names",
            Behaviour::BrokenBean => "broken-bean",
            Behaviour::Markup => "markup",
            Behaviour::Shifty => "shifty",
        }
    }

    /// The behaviours that answer well-formed MBeans, for scrapes.
    pub const MBEANS: [Behaviour; 3] = [
        Behaviour::DeepComposite,
        Behaviour::LongNames,
        Behaviour::OwnNames,
    ];

    /// Every behaviour that answers well-formed MBeans.
    const WELL_FORMED: [Behaviour; 6] = [
        Behaviour::DeepComposite,
        Behaviour::LongNames,
        Behaviour::OwnNames,
        Behaviour::BrokenBean,
        Behaviour::Markup,
        Behaviour::Shifty,
    ];

    fn from_name(name: &str) -> Option<Behaviour> {
        Behaviour::ALL
            .into_iter()
            .chain(Behaviour::WELL_FORMED)
            .find(|b| b.name() == name)
    }
}

/// How deep [`Behaviour::Deep`] nests its values.
pub const DEPTH: usize = 300;

pub struct HostileAgent {
    pub port: u16,
    /// The most bytes written on one connection, per behaviour.
    sent: Arc<Mutex<HashMap<Behaviour, u64>>>,
    stop: Arc<AtomicBool>,
}

impl HostileAgent {
    pub fn start() -> HostileAgent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sent2, stop2) = (sent.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (sent, stop) = (sent2.clone(), stop2.clone());
                std::thread::spawn(move || serve(stream, &sent, &stop));
            }
        });
        HostileAgent { port, sent, stop }
    }

    /// The agent URL behind which it behaves as `b`.
    pub fn url(&self, b: Behaviour) -> String {
        format!("http://127.0.0.1:{}/{}/jolokia", self.port, b.name())
    }

    /// The most bytes it wrote on one connection behaving as `b`.
    pub fn bytes_sent(&self, b: Behaviour) -> u64 {
        self.sent.lock().unwrap().get(&b).copied().unwrap_or(0)
    }

    /// `[[targets]]` entries, one per behaviour, named after it, with
    /// `extra` lines in each.
    pub fn targets_toml(&self, extra: &str) -> String {
        Behaviour::ALL
            .iter()
            .map(|b| {
                format!(
                    "[[targets]]\nname = \"{}\"\nurl = \"{}\"\n{extra}\n",
                    b.name(),
                    self.url(*b)
                )
            })
            .collect()
    }
}

impl Drop for HostileAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(stream: TcpStream, sent: &Mutex<HashMap<Behaviour, u64>>, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    // One request per connection is enough: every answer closes it.
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let path = first.split(' ').nth(1).unwrap_or("/");
    let behaviour = path
        .trim_start_matches('/')
        .split('/')
        .next()
        .and_then(Behaviour::from_name);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let Some(behaviour) = behaviour else {
        let _ = out
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    };
    let items = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(items)) => items,
        Ok(one) => vec![one],
        Err(_) => vec![Value::Null],
    };
    let written = answer(behaviour, &items, &mut out, stop);
    let mut sent = sent.lock().unwrap();
    let most = sent.entry(behaviour).or_default();
    *most = (*most).max(written);
}

/// Writes the answer; returns how many bytes went out.
fn answer(b: Behaviour, items: &[Value], out: &mut TcpStream, stop: &AtomicBool) -> u64 {
    let head = |status: &str, content_type: &str, framing: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{framing}\r\nconnection: close\r\n\r\n"
        )
    };
    let mut written = 0u64;
    let mut send = |bytes: &[u8]| -> bool {
        match out.write_all(bytes) {
            Ok(()) => {
                written += bytes.len() as u64;
                true
            }
            Err(_) => false,
        }
    };
    let whole = |status: &str, content_type: &str, body: &[u8]| {
        let mut v = head(
            status,
            content_type,
            &format!("content-length: {}", body.len()),
        )
        .into_bytes();
        v.extend_from_slice(body);
        v
    };
    match b {
        Behaviour::Endless400 | Behaviour::Endless200 => {
            let (status, ctype, start) = if b == Behaviour::Endless400 {
                ("400 Bad Request", "text/plain", "400 (Bad Request)\n\n")
            } else {
                ("200 OK", "application/json", "[{\"value\":\"")
            };
            if !send(head(status, ctype, "transfer-encoding: chunked").as_bytes()) {
                return written;
            }
            let chunk = |data: &[u8]| {
                let mut c = format!("{:x}\r\n", data.len()).into_bytes();
                c.extend_from_slice(data);
                c.extend_from_slice(b"\r\n");
                c
            };
            if !send(&chunk(start.as_bytes())) {
                return written;
            }
            let filler = chunk(&[b'x'; 64 * 1024]);
            while !stop.load(Ordering::Relaxed) && send(&filler) {}
        }
        Behaviour::LyingLength => {
            if !send(head("200 OK", "application/json", "content-length: 10000000000").as_bytes())
                || !send(b"[{\"value\":\"")
            {
                return written;
            }
            let filler = [b'x'; 64 * 1024];
            while !stop.load(Ordering::Relaxed) && send(&filler) {}
        }
        Behaviour::Deep => {
            let deep = format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
            let answers: Vec<String> = items
                .iter()
                .map(|item| {
                    format!(
                        "{{\"request\":{item},\"value\":{deep},\"timestamp\":1,\"status\":200}}"
                    )
                })
                .collect();
            send(&whole(
                "200 OK",
                "application/json",
                format!("[{}]", answers.join(",")).as_bytes(),
            ));
        }
        Behaviour::WrongTypes => {
            let answers: Vec<Value> = items
                .iter()
                .map(|_| json!({"request": "nope", "value": {"a": 1}, "timestamp": "soon", "status": "200", "error_type": 7}))
                .collect();
            send(&whole(
                "200 OK",
                "application/json",
                Value::Array(answers).to_string().as_bytes(),
            ));
        }
        Behaviour::NotJson => {
            send(&whole(
                "200 OK",
                "text/html",
                b"<html><body>It works!</body></html>",
            ));
        }
        Behaviour::Short => {
            send(&whole("200 OK", "application/json", b"[]"));
        }
        Behaviour::Slow => {
            // The stall itself (30 s, as documented), not a wait for
            // anything: it only looks at `stop` to end early on drop.
            for _ in 0..300 {
                if stop.load(Ordering::Relaxed) {
                    return written;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let answers: Vec<Value> = items
                .iter()
                .map(|_| json!({"value": "late", "timestamp": 1, "status": 200}))
                .collect();
            send(&whole(
                "200 OK",
                "application/json",
                Value::Array(answers).to_string().as_bytes(),
            ));
        }
        Behaviour::Garbage => {
            send(b"SSH-2.0-OpenSSH_9.2\r\n\r\nnot http at all\r\n");
        }
        Behaviour::DeepComposite
        | Behaviour::LongNames
        | Behaviour::OwnNames
        | Behaviour::BrokenBean
        | Behaviour::Markup
        | Behaviour::Shifty => {
            let beans = mbeans(b);
            let answers: Vec<Value> = items
                .iter()
                .map(|item| mbean_answer(&beans, item))
                .collect();
            send(&whole(
                "200 OK",
                "application/json",
                Value::Array(answers).to_string().as_bytes(),
            ));
        }
    }
    written
}

/// An MBean of the MBean behaviours: its name (domain, keys as
/// registered) and its attributes' declared types and values.
type Bean = (String, Vec<(&'static str, &'static str, Value)>);

fn mbeans(b: Behaviour) -> Vec<Bean> {
    const COMPOSITE: &str = "javax.management.openmbean.CompositeData";
    match b {
        Behaviour::DeepComposite => {
            // Each level: NESTED_ITEMS - 1 numbers and one level further.
            let mut value = json!(1);
            for depth in 0..NESTING {
                let mut level = serde_json::Map::new();
                for i in 0..NESTED_ITEMS {
                    let key = format!("{depth:02}{i}{}", "k".repeat(NESTED_KEY - 3));
                    level.insert(key, if i == 0 { value.clone() } else { json!(i) });
                }
                value = Value::Object(level);
            }
            vec![(
                "evil:type=Deep".into(),
                vec![("Tree", COMPOSITE, value), ("Fine", "int", json!(5))],
            )]
        }
        Behaviour::LongNames => (0..LONG_NAMES)
            .map(|i| {
                let name = format!("evil:type=Long,name={i:04}{}", "a".repeat(LONG_NAME - 4));
                (name, vec![("Value", "int", json!(i))])
            })
            .collect(),
        Behaviour::BrokenBean => vec![(
            "Catalina:type=Server".into(),
            vec![
                ("port", "int", json!(8005)),
                ("broken", "java.lang.String", json!("never serialised")),
                ("value", "java.lang.Object", json!(3)),
                (
                    "managedResource",
                    "org.apache.catalina.core.StandardServer",
                    json!({}),
                ),
            ],
        )],
        Behaviour::Shifty => vec![
            (
                "shifty:type=Values".into(),
                vec![
                    ("Count", "java.lang.Object", json!(5)),
                    ("Shape", "long", json!({"not": "a number"})),
                    ("Fine", "int", json!(7)),
                    ("State", "java.lang.String", json!("RUNNING")),
                ],
            ),
            ("shifty:type=Array".into(), vec![("Value", "int", json!(1))]),
        ],
        Behaviour::Markup => vec![(
            MARKUP_MBEAN.into(),
            vec![("Value", "java.lang.String", json!(MARKUP_VALUE))],
        )],
        _ => vec![
            (
                "evil:type=Labels,target=inner,exported_target=outer".into(),
                vec![("Value", "int", json!(7))],
            ),
            ("jmx:type=scrape".into(), vec![("error", "int", json!(736))]),
        ],
    }
}

/// A Jolokia path's segments: `/` separates, `!` escapes the next char.
fn path_segments(path: &str) -> Vec<String> {
    let mut segments = vec![String::new()];
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '!' => segments.last_mut().unwrap().extend(chars.next()),
            '/' => segments.push(String::new()),
            c => segments.last_mut().unwrap().push(c),
        }
    }
    segments
}

/// One item's answer from `beans`: `list` lists them, `read` reads their
/// attributes, anything else (the health probe's `version`) answers.
fn mbean_answer(beans: &[Bean], item: &Value) -> Value {
    let ok = |value: Value| json!({"request": item, "value": value, "timestamp": 1, "status": 200});
    match item["type"].as_str() {
        Some("list") => {
            let mut domains = serde_json::Map::new();
            for (name, attributes) in beans {
                let (domain, keys) = name.split_once(':').unwrap();
                let attr: serde_json::Map<String, Value> = attributes
                    .iter()
                    .map(|(a, t, _)| (a.to_string(), json!({"type": t, "desc": a, "rw": false})))
                    .collect();
                domains
                    .entry(domain)
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .unwrap()
                    .insert(keys.to_string(), json!({"desc": "hostile", "attr": attr}));
            }
            // A `path` (`domain/keys`, `!` escaping) narrows the answer.
            let mut value = Value::Object(domains);
            if let Some(path) = item["path"].as_str() {
                for segment in path_segments(path) {
                    value = value.get(&segment).cloned().unwrap_or(Value::Null);
                }
            }
            ok(value)
        }
        Some("read") => {
            let names_broken = match &item["attribute"] {
                Value::String(a) => a == "broken",
                Value::Array(a) => a.iter().any(|a| a == "broken"),
                _ => false,
            };
            if names_broken {
                BROKEN_READS.fetch_add(1, Ordering::Relaxed);
                return json!({"request": item, "status": 500, "error_type": "java.lang.IllegalArgumentException",
                    "error": "Cannot convert a \"java.lang.Object\" value to \"java.lang.String\""});
            }
            let Some((_, attributes)) = beans
                .iter()
                .find(|(n, _)| Some(n.as_str()) == item["mbean"].as_str())
            else {
                return json!({"request": item, "status": 404, "error_type": "javax.management.InstanceNotFoundException", "error": "no such MBean"});
            };
            if let Value::String(one) = &item["attribute"] {
                return match attributes.iter().find(|(a, _, _)| a == one) {
                    Some((_, _, v)) => ok(v.clone()),
                    None => {
                        json!({"request": item, "status": 404, "error_type": "javax.management.AttributeNotFoundException", "error": "no such attribute"})
                    }
                };
            }
            // No attribute, or an empty list: all of them, as Jolokia reads.
            let asked: Vec<&str> = match &item["attribute"] {
                Value::Array(a) if !a.is_empty() => a.iter().filter_map(Value::as_str).collect(),
                _ => attributes.iter().map(|(a, _, _)| *a).collect(),
            };
            let mut value: serde_json::Map<String, Value> = attributes
                .iter()
                .filter(|(a, _, _)| asked.contains(a))
                .map(|(a, _, v)| (a.to_string(), v.clone()))
                .collect();
            // Behaviour::Shifty's wrong shapes.
            if item["mbean"] == "shifty:type=Array" {
                return ok(json!([1, 2, 3]));
            }
            let shifty = item["mbean"] == "shifty:type=Values" && value.contains_key("Count");
            if shifty && SHIFTY_READS.fetch_add(1, Ordering::Relaxed) % 2 == 1 {
                value.insert("Count".into(), json!("five"));
            }
            ok(Value::Object(value))
        }
        _ => ok(json!({"agent": "2.6.0", "protocol": "8.0", "config": {}, "info": {}})),
    }
}
