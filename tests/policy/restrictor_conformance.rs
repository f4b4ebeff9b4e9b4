//! Jolokia restrictor conformance: every row of
//! `tests/conformance/restrictor/cases.psv` (a verbatim copy of the shared
//! conformance data, checked against Jolokia's HEAD classes) is run through
//! the public API of `jmxgate::policy::Policy`. Rows where jmxgate is
//! deliberately stricter than Jolokia (`jmxgate::policy::STRICTER`) are
//! asserted with the stricter value and listed in [`STRICTER_ROWS`].
//!
//! `cases.psv` format: `fixture|kind|arg1|arg2|expected|source`, `#` comments.
//!
//! | kind           | arg1                                  | arg2           | expected                    |
//! |----------------|---------------------------------------|----------------|-----------------------------|
//! | `read`/`write` | ObjectName                            | attribute      | `true`/`false`              |
//! | `exec`         | ObjectName                            | operation      | `true`/`false`              |
//! | `type`         | command (`read`, `list`, …)           |                | `true`/`false`              |
//! | `http`         | `GET`/`POST`                          |                | `true`/`false`              |
//! | `remote`       | chain, `,`-separated (empty: no entry) |                | `true`/`false`              |
//! | `origin`       | origin, or `NULL`                     | onlyIfStrict   | `true`/`false`              |
//! | `ignoreScheme` |                                       |                | `true`/`false`              |
//! | `hidden`       | ObjectName                            |                | `true`/`false`              |
//! | `load`         |                                       |                | `ok`, `error`, `error:a;b`  |
//! | `ipmatch`      | expected spec (fixture is `-`)        | address        | `true`/`false`/`error`      |
//!
//! `error:a;b` means loading fails with a message containing `a` and `b`.
//! The ad-hoc probes of EXPECTATIONS.md (inline policies) run too, in
//! [`adhoc_probes_from_expectations`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jmxgate::policy::{self, Policy, PolicyError};
use jmxgate::protocol::ObjectName;

/// Rows whose expected value differs under jmxgate's stricter rules:
/// (fixture, kind, arg1, arg2, jmxgate's value, reason).
const STRICTER_ROWS: &[(&str, &str, &str, &str, &str, &str)] = &[(
    "access-sample2.xml",
    "read",
    "java.lang:*",
    "HeapMemoryUsage",
    "false",
    "rule 3: read on an ObjectName pattern is decided per concrete MBean",
)];

/// The same for the ad-hoc probes (policy name instead of fixture).
const STRICTER_ADHOC: &[(&str, &str, &str, &str, &str, &str)] = &[
    (
        "dup-and-shadow.xml",
        "read",
        "x:type=T",
        "abcd",
        "false",
        "rule 2: in `a.c*` the `.` is literal",
    ),
    (
        "deny-exact.xml",
        "exec",
        "jdk.management.jfr:type=FlightRecorder,*",
        "startRecording",
        "false",
        "rule 3: exec on an ObjectName pattern is decided per concrete MBean",
    ),
    (
        "deny-exact.xml",
        "exec",
        "jdk.management.jfr:*",
        "startRecording",
        "false",
        "rule 3: exec on an ObjectName pattern is decided per concrete MBean",
    ),
    (
        "deny-exact.xml",
        "exec",
        "java.lang:type=Memory",
        "gc()",
        "false",
        "rule 1: the bare name `gc` of `gc()` is denied",
    ),
];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/restrictor")
}

#[derive(Debug)]
struct Row {
    line: usize,
    fixture: String,
    kind: String,
    arg1: String,
    arg2: String,
    expected: String,
    source: String,
}

fn read_rows() -> Vec<Row> {
    let text = std::fs::read_to_string(dir().join("cases.psv")).expect("cases.psv");
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.splitn(6, '|').collect();
        assert_eq!(fields.len(), 6, "cases.psv line {}: {line:?}", i + 1);
        rows.push(Row {
            line: i + 1,
            fixture: fields[0].to_string(),
            kind: fields[1].to_string(),
            arg1: fields[2].to_string(),
            arg2: fields[3].to_string(),
            expected: fields[4].to_string(),
            source: fields[5].to_string(),
        });
    }
    rows
}

fn name(s: &str) -> Result<ObjectName, String> {
    ObjectName::parse(s)
}

fn flag(b: bool) -> String {
    b.to_string()
}

/// Runs one check against a loaded policy (or the load result itself) and
/// says whether it gave `expected`. `Err` describes a malformed row.
fn run(
    policy: &Result<Policy, PolicyError>,
    kind: &str,
    arg1: &str,
    arg2: &str,
    expected: &str,
) -> Result<(bool, String), String> {
    if kind == "load" {
        let actual = match policy {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("error ({})", e.message),
        };
        let pass = match expected.split_once(':') {
            None if expected == "ok" => policy.is_ok(),
            None if expected == "error" => policy.is_err(),
            Some(("error", needles)) => policy
                .as_ref()
                .err()
                .is_some_and(|e| needles.split(';').all(|n| e.message.contains(n))),
            _ => return Err(format!("unknown load expectation {expected:?}")),
        };
        return Ok((pass, actual));
    }
    let p = match policy {
        Ok(p) => p,
        Err(e) => return Ok((false, format!("policy failed to load: {e}"))),
    };
    let actual = match kind {
        "read" => flag(p.read_allowed(&name(arg1)?, arg2).allowed),
        "write" => flag(p.write_allowed(&name(arg1)?, arg2).allowed),
        "exec" => flag(p.exec_allowed(&name(arg1)?, arg2).allowed),
        "type" => flag(p.type_allowed(arg1).allowed),
        "http" => flag(p.http_method_allowed(arg1).allowed),
        "remote" => {
            let chain: Vec<&str> = if arg1.is_empty() {
                Vec::new()
            } else {
                arg1.split(',').map(str::trim).collect()
            };
            flag(p.remote_allowed(&chain).allowed)
        }
        "origin" => {
            let origin = (arg1 != "NULL").then_some(arg1);
            let strict = arg2
                .parse::<bool>()
                .map_err(|_| format!("onlyIfStrict {arg2:?}"))?;
            flag(p.origin_allowed(origin, strict))
        }
        "ignoreScheme" => flag(p.ignore_scheme()),
        "hidden" => flag(p.hidden(&name(arg1)?)),
        other => return Err(format!("unknown kind {other:?}")),
    };
    // A check Jolokia answers with an exception fails the request: denied.
    let expected = if expected == "error" {
        "false"
    } else {
        expected
    };
    Ok((actual == expected, actual))
}

fn stricter_for<'a>(
    list: &'a [(&str, &str, &str, &str, &str, &str)],
    fixture: &str,
    kind: &str,
    arg1: &str,
    arg2: &str,
) -> Option<&'a (&'a str, &'a str, &'a str, &'a str, &'a str, &'a str)> {
    list.iter()
        .find(|(f, k, a1, a2, _, _)| *f == fixture && *k == kind && *a1 == arg1 && *a2 == arg2)
}

fn print_stricter(title: &str, list: &[(&str, &str, &str, &str, &str, &str)]) {
    println!("{title} ({} rows):", list.len());
    for (f, k, a1, a2, v, why) in list {
        println!("  {f} {k} {a1:?} {a2:?} -> {v}  [{why}]");
    }
}

#[test]
fn cases_psv() {
    let rows = read_rows();
    assert!(
        rows.len() >= 200,
        "cases.psv yielded only {} rows: refusing to pass vacuously",
        rows.len()
    );
    let mut policies: HashMap<String, Result<Policy, PolicyError>> = HashMap::new();
    let mut failures = Vec::new();
    let mut used_stricter = Vec::new();
    for row in &rows {
        let (expected, stricter) =
            match stricter_for(STRICTER_ROWS, &row.fixture, &row.kind, &row.arg1, &row.arg2) {
                Some(s) => {
                    used_stricter.push(s);
                    if s.4 == row.expected {
                        failures.push(format!(
                            "line {}: listed as stricter but Jolokia's value is already {}",
                            row.line, s.4
                        ));
                    }
                    (s.4, " (stricter than Jolokia)")
                }
                None => (row.expected.as_str(), ""),
            };
        let outcome = if row.kind == "ipmatch" {
            match policy::ip::matches(&row.arg1, &row.arg2) {
                Ok(b) => Ok((b.to_string() == expected, b.to_string())),
                Err(e) => Ok((expected == "error", format!("error ({e})"))),
            }
        } else {
            let policy = policies
                .entry(row.fixture.clone())
                .or_insert_with(|| Policy::load(&dir().join(&row.fixture)));
            run(policy, &row.kind, &row.arg1, &row.arg2, expected)
        };
        match outcome {
            Ok((true, _)) => {}
            Ok((false, actual)) => failures.push(format!(
                "line {}: {} {} {:?} {:?}: expected {expected}{stricter}, got {actual}  [{}]",
                row.line, row.fixture, row.kind, row.arg1, row.arg2, row.source
            )),
            Err(bad) => failures.push(format!("line {}: malformed row: {bad}", row.line)),
        }
    }
    for s in STRICTER_ROWS {
        if !used_stricter.contains(&s) {
            failures.push(format!("stricter row not found in cases.psv: {s:?}"));
        }
    }
    print_stricter("rows asserted with jmxgate's stricter value", STRICTER_ROWS);
    println!(
        "{} of {} cases.psv rows pass",
        rows.len() - failures.len(),
        rows.len()
    );
    assert!(
        failures.is_empty(),
        "{} failing row(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// One ad-hoc row: kind, arg1, arg2, expected (fields as in cases.psv).
type Probe = (&'static str, &'static str, &'static str, &'static str);

/// The "Ad-hoc semantic probes" of EXPECTATIONS.md: (policy, xml, rows).
const ADHOC: &[(&str, &str, &[Probe])] = &[
    (
        "empty-remote.xml",
        "<restrict><remote/></restrict>",
        &[("remote", "127.0.0.1", "", "false"), ("remote", "", "", "false")],
    ),
    (
        "empty-http.xml",
        "<restrict><http></http></restrict>",
        &[("http", "GET", "", "false"), ("http", "POST", "", "false")],
    ),
    (
        "strict-only.xml",
        "<restrict><cors><strict-checking/></cors></restrict>",
        &[
            ("origin", "NULL", "true", "false"),
            ("origin", "http://anything", "true", "true"),
            ("origin", "NULL", "false", "false"),
        ],
    ),
    (
        "unknown-cmd.xml",
        "<restrict><commands><command>foo</command></commands></restrict>",
        &[("load", "", "", "error")],
    ),
    (
        "config-cmd.xml",
        "<restrict><commands><command>READ</command><command>config</command></commands></restrict>",
        &[
            ("type", "read", "", "true"),
            ("type", "config", "", "true"),
            ("type", "version", "", "false"),
        ],
    ),
    (
        "dup-and-shadow.xml",
        r#"<restrict>
  <commands><command>list</command></commands>
  <allow>
    <mbean><name>java.lang:type=Memory</name><attribute>A</attribute></mbean>
    <mbean><name>java.lang:type=Memory</name><attribute>B</attribute></mbean>
    <mbean><name>java.lang:*</name><attribute>C</attribute><attribute>B</attribute></mbean>
    <mbean><name>x:type=T</name><attribute>a.c*</attribute><attribute mode="READ">RO</attribute><attribute mode="write">RW</attribute><operation>op</operation></mbean>
  </allow>
  <deny>
    <mbean><name>java.lang:*</name><attribute>*</attribute></mbean>
  </deny>
</restrict>"#,
        &[
            ("read", "java.lang:type=Memory", "A", "false"),
            ("read", "java.lang:type=Memory", "B", "true"),
            ("read", "java.lang:type=Memory", "C", "false"),
            ("read", "java.lang:type=Runtime", "C", "true"),
            ("read", "x:type=T", "abcd", "true"),
            ("read", "x:type=T", "a.c", "true"),
            ("read", "x:type=T", "ac", "false"),
            ("write", "x:type=T", "RO", "false"),
            ("read", "x:type=T", "RO", "true"),
            ("write", "x:type=T", "RW", "true"),
            ("exec", "x:type=T", "op", "true"),
            ("exec", "x:type=T", "op()", "false"),
        ],
    ),
    (
        "deny-exact.xml",
        r#"<restrict>
  <deny>
    <mbean><name>jdk.management.jfr:type=FlightRecorder</name><attribute>*</attribute><operation>*</operation></mbean>
    <mbean><name>java.lang:type=Memory</name><operation>gc</operation></mbean>
  </deny>
</restrict>"#,
        &[
            ("exec", "jdk.management.jfr:type=FlightRecorder", "startRecording", "false"),
            ("exec", "jdk.management.jfr:type=FlightRecorder,*", "startRecording", "true"),
            ("exec", "jdk.management.jfr:*", "startRecording", "true"),
            ("exec", "java.lang:type=Memory", "gc", "false"),
            ("exec", "java.lang:type=Memory", "gc()", "true"),
            ("read", "jdk.management.jfr:type=FlightRecorder", "Recordings", "false"),
        ],
    ),
    (
        "mbeans-synonym.xml",
        "<restrict><commands/><mbeans><mbean><name>a:b=c</name><attribute>x</attribute></mbean></mbeans></restrict>",
        &[("read", "a:b=c", "x", "true"), ("read", "a:b=c", "y", "false")],
    ),
    (
        "prefixed.xml",
        r#"<j:restrict xmlns:j="http://www.jolokia.org/jolokia-restrictor/schema/config"><j:remote><j:host>1.2.3.4</j:host></j:remote><j:commands/></j:restrict>"#,
        &[("remote", "9.9.9.9", "", "true"), ("type", "read", "", "true")],
    ),
    (
        // Jolokia throws PatternSyntaxException on every check: denied.
        "badregex.xml",
        "<restrict><deny><mbean><name>a:b=c</name><attribute>foo(*</attribute></mbean></deny></restrict>",
        &[("read", "a:b=c", "foo", "error"), ("read", "a:b=c", "bar", "error")],
    ),
    (
        "hosts.xml",
        "<restrict><remote><host>Planck</host><host>10.0.0.0/8</host><host>[::1]</host><host>127.0.0.1</host></remote></restrict>",
        &[
            ("remote", "planck", "", "true"),
            ("remote", "10.200.3.4", "", "true"),
            ("remote", "::1", "", "true"),
            ("remote", "0:0:0:0:0:0:0:1", "", "true"),
            ("remote", "::ffff:10.1.2.3", "", "false"),
            ("remote", "localhost", "", "false"),
            ("remote", "127.0.0.1,10.1.1.1", "", "true"),
            ("remote", "localhost,127.0.0.1", "", "false"),
        ],
    ),
];

#[test]
fn adhoc_probes_from_expectations() {
    let mut failures = Vec::new();
    let mut total = 0;
    let mut used = 0;
    for (policy_name, xml, rows) in ADHOC {
        let policy = Policy::parse(xml);
        for (kind, arg1, arg2, jolokia) in *rows {
            total += 1;
            let expected = match stricter_for(STRICTER_ADHOC, policy_name, kind, arg1, arg2) {
                Some(s) => {
                    used += 1;
                    s.4
                }
                None => jolokia,
            };
            match run(&policy, kind, arg1, arg2, expected) {
                Ok((true, _)) => {}
                Ok((false, actual)) => failures.push(format!(
                    "{policy_name} {kind} {arg1:?} {arg2:?}: expected {expected}, got {actual}"
                )),
                Err(bad) => failures.push(format!("{policy_name}: malformed row: {bad}")),
            }
        }
    }
    assert_eq!(
        used,
        STRICTER_ADHOC.len(),
        "every stricter ad-hoc row must exist"
    );
    print_stricter(
        "ad-hoc probes asserted with jmxgate's stricter value",
        STRICTER_ADHOC,
    );
    println!("{} of {total} ad-hoc probes pass", total - failures.len());
    assert!(total >= 40, "only {total} ad-hoc probes");
    assert!(
        failures.is_empty(),
        "{} failing probe(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn reference_templates_load() {
    // The documentation template from Jolokia's site, and every fixture
    // that is not meant to fail.
    let template = Policy::load(&dir().join("extra/site-template-jolokia-access.xml"))
        .expect("site template loads");
    let config = ObjectName::parse("jolokia:type=Config").unwrap();
    assert!(template.exec_allowed(&config, "anything").allowed);
    let c3p0 = ObjectName::parse("com.mchange.v2.c3p0:type=PooledDataSource,name=x").unwrap();
    assert!(!template.read_allowed(&c3p0, "properties").allowed);
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        if file.ends_with(".xml") {
            let loaded = Policy::load(&path);
            assert_eq!(
                loaded.is_ok(),
                !file.starts_with("illegal"),
                "{file}: {loaded:?}"
            );
        }
    }
}
