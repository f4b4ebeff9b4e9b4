//! The manual (README.md and the book in docs/) against the code: the
//! configuration reference lists exactly the keys the parser takes, every
//! configuration example passes `jmxgate check-config`, every policy
//! example loads, every link and anchor resolves, the command's help points
//! into the manual, and the curl lines answer against the running demo.
//!
//! Markers in the markdown, as HTML comments just before a code block:
//! - `<!-- file: PATH -->`: the block is the content of PATH, which the
//!   chapter's other examples name (written before any is checked);
//! - `<!-- example: not checked: WHY -->`: the block is left alone, for the
//!   reason given (a fragment that can't stand alone, a file of another
//!   tool).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use toml::{Table, Value};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every chapter of the book.
fn manual_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    files.extend(chapters);
    files
}

fn shown(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------
// The markdown: headings, links and code blocks, as mdbook and GitHub
// read them.

#[derive(Debug, Default)]
struct Page {
    /// Heading ids, as mdbook and GitHub make them.
    anchors: BTreeSet<String>,
    /// (link target, line).
    links: Vec<(String, usize)>,
    blocks: Vec<Block>,
    /// Level-2 sections: (heading text, the section's markdown).
    sections: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
struct Block {
    language: String,
    text: String,
    line: usize,
    /// The HTML comment just before it, if any (without `<!--`, `-->`).
    marker: Option<String>,
}

/// mdbook's `normalize_id`, which GitHub's anchors agree with for the
/// headings a manual has.
fn anchor_of(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

fn read_page(path: &Path) -> Page {
    let text = std::fs::read_to_string(path).unwrap();
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut page = Page::default();
    let mut heading: Option<(HeadingLevel, String, usize)> = None;
    let mut code: Option<Block> = None;
    let mut marker: Option<String> = None;
    let mut section: Option<(String, usize)> = None;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (event, range) in Parser::new_ext(&text, Options::all()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                heading = Some((level, String::new(), range.start));
            }
            Event::End(TagEnd::Heading(_)) => {
                let (level, title, start) = heading.take().unwrap();
                let mut id = anchor_of(&title);
                let count = seen.entry(id.clone()).or_insert(0);
                if *count > 0 {
                    id = format!("{id}-{count}");
                }
                *count += 1;
                page.anchors.insert(id);
                if level <= HeadingLevel::H2 {
                    if let Some((name, from)) = section.take() {
                        page.sections.push((name, text[from..start].to_string()));
                    }
                    if level == HeadingLevel::H2 {
                        section = Some((title, range.end));
                    }
                }
                marker = None;
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, title, _)) = heading.as_mut() {
                    title.push_str(&t);
                }
                if let Some(block) = code.as_mut() {
                    block.text.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => {
                page.links
                    .push((dest_url.to_string(), line_of(range.start)));
            }
            Event::Html(html) => {
                let html = html.trim();
                if let Some(inner) = html
                    .strip_prefix("<!--")
                    .and_then(|h| h.strip_suffix("-->"))
                {
                    marker = Some(inner.trim().to_string());
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split([',', ' ']).next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                code = Some(Block {
                    language,
                    text: String::new(),
                    line: line_of(range.start),
                    marker: marker.take(),
                });
            }
            Event::End(TagEnd::CodeBlock) => page.blocks.push(code.take().unwrap()),
            Event::Start(Tag::Paragraph)
            | Event::Start(Tag::Table(_))
            | Event::Start(Tag::List(_)) => {
                marker = None;
            }
            _ => {}
        }
    }
    if let Some((name, from)) = section {
        page.sections.push((name, text[from..].to_string()));
    }
    page
}

// ---------------------------------------------------------------------
// Links and anchors.

#[test]
fn every_link_and_anchor_in_the_manual_resolves() {
    let mut problems = Vec::new();
    let mut pages: BTreeMap<PathBuf, Page> = BTreeMap::new();
    for file in manual_files() {
        for (link, line) in read_page(&file).links {
            if let Err(why) = resolve(&file, &link, &mut pages) {
                problems.push(format!("{}:{line}: {link}: {why}", shown(&file)));
            }
        }
    }
    assert!(problems.is_empty(), "dead links:\n{}", problems.join("\n"));
}

/// Whether a link from `from` reaches an existing file (and heading).
fn resolve(from: &Path, link: &str, pages: &mut BTreeMap<PathBuf, Page>) -> Result<(), String> {
    if link.contains("://") || link.starts_with("mailto:") {
        return Ok(()); // outside the repository: not checked offline
    }
    let (path, anchor) = match link.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (link, None),
    };
    let target = if path.is_empty() {
        from.to_path_buf()
    } else {
        from.parent().unwrap().join(path)
    };
    let target = normalise(&target);
    if !target.exists() {
        return Err(format!("no file {}", shown(&target)));
    }
    let Some(anchor) = anchor else {
        return Ok(());
    };
    if target.extension().is_none_or(|e| e != "md") {
        return Err("an anchor into a file that is not markdown".into());
    }
    let page = pages
        .entry(target.clone())
        .or_insert_with(|| read_page(&target));
    if page.anchors.contains(anchor) {
        Ok(())
    } else {
        Err(format!("no heading #{anchor} in {}", shown(&target)))
    }
}

fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_chapter_is_in_the_books_summary_and_the_readme_is_short() {
    let summary = std::fs::read_to_string(repo().join("docs/SUMMARY.md")).unwrap();
    for file in manual_files().iter().skip(1) {
        let name = file.file_name().unwrap().to_str().unwrap();
        if name != "SUMMARY.md" {
            assert!(
                summary.contains(&format!("({name})")),
                "docs/{name} is not in docs/SUMMARY.md, so the book leaves it out"
            );
        }
    }
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: it is the front page; the manual goes in docs/"
    );
}

// ---------------------------------------------------------------------
// The command's help.

/// `jmxgate --help` and every subcommand's help name a chapter of the
/// manual that exists (with its heading, when one is named).
#[test]
fn the_commands_help_points_into_the_manual() {
    let mut pages = BTreeMap::new();
    let mut commands = vec![Vec::<String>::new()];
    let mut problems = Vec::new();
    while let Some(command) = commands.pop() {
        let output = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
            .args(&command)
            .arg("--help")
            .output()
            .unwrap();
        assert!(output.status.success(), "jmxgate {command:?} --help failed");
        let help = String::from_utf8(output.stdout).unwrap();
        let named: Vec<&str> = help
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
            .filter(|w| w.starts_with("docs/") && w.contains(".md"))
            .map(|w| w.trim_end_matches(['.', ';', ':']))
            .collect();
        if named.is_empty() {
            problems.push(format!(
                "`jmxgate {}` --help names no chapter",
                command.join(" ")
            ));
        }
        for link in named {
            if let Err(why) = resolve(&repo().join("README.md"), link, &mut pages) {
                problems.push(format!(
                    "`jmxgate {}` --help: {link}: {why}",
                    command.join(" ")
                ));
            }
        }
        // Subcommands: the lines under "Commands:".
        let mut in_commands = false;
        for line in help.lines() {
            if line.starts_with("Commands:") {
                in_commands = true;
                continue;
            }
            if in_commands {
                let Some(name) = line
                    .strip_prefix("  ")
                    .and_then(|l| l.split_whitespace().next())
                else {
                    break;
                };
                if name != "help" {
                    let mut sub = command.clone();
                    sub.push(name.to_string());
                    commands.push(sub);
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------
// Configuration examples and policy files.

/// The files a chapter's examples name that the manual does not show
/// (certificates, keys, secrets), made once per scratch directory.
fn write_fixtures(dir: &Path) {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let ed25519 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    // An OpenID provider's key set: the P-256 key's point as a JWK.
    let point = key.public_key_raw();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let jwks = serde_json::json!({"keys": [{
        "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "k1",
        "x": b64(&point[1..33]), "y": b64(&point[33..65]),
    }]});
    let rules = "lowercaseOutputName: true\nrules:\n  - pattern: 'java.lang<type=(.+)><>(\\w+)'\n    name: jvm_$1_$2\n";
    let kubeconfig = "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
        clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\n\
        users: [{name: u, user: {token: a-token}}]\n\
        contexts: [{name: c, context: {cluster: k, user: u}}]\n";
    let files: &[(&str, String)] = &[
        ("tls/gateway.pem", cert.pem()),
        ("tls/gateway.key", key.serialize_pem()),
        ("tls/clients-ca.pem", cert.pem()),
        ("tls/agents-ca.pem", cert.pem()),
        ("tls/gateway-client.pem", cert.pem()),
        ("tls/gateway-client.key", key.serialize_pem()),
        ("siem-ca.pem", cert.pem()),
        ("secrets/agent.pw", "an agent password\n".into()),
        ("inventory/secrets/kafka.pw", "an agent password\n".into()),
        ("otlp-token", "a token\n".into()),
        ("audit-signing.key", ed25519.serialize_pem()),
        ("audit.key", ed25519.serialize_pem()),
        ("jwks.json", jwks.to_string()),
        ("kubeconfig", kubeconfig.into()),
        ("rules/kafka.yml", rules.into()),
        ("rules/tomcat.yml", rules.into()),
        ("rules/kafka-2_0_0.yml", rules.into()),
    ];
    for (name, content) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        // Keys and secrets as an operator keeps them: the gateway refuses
        // a signing key others may read.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    // The repository's example policies, as the docs name them.
    copy_dir(&repo().join("policies"), &dir.join("policies"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The manual's absolute paths, taken inside the scratch directory as a
/// chroot would: `/etc/jmxgate/` is where the fixtures are,
/// `/var/log/jmxgate/` a directory of its own.
fn in_scratch(text: &str, dir: &Path) -> String {
    text.replace("/etc/jmxgate/", &format!("{}/", dir.display()))
        .replace("/var/log/jmxgate/", &format!("{}/var-log/", dir.display()))
}

/// A block's marker, parsed: the file it is, or why it is left alone.
enum Marker<'a> {
    File(&'a str),
    /// The settings file of the client commands (`--client-config`).
    ClientConfig,
    NotChecked,
    None,
}

fn marker_of(block: &Block) -> Marker<'_> {
    match block.marker.as_deref() {
        Some(m) if m.starts_with("file:") => Marker::File(m["file:".len()..].trim()),
        Some("example: client config") => Marker::ClientConfig,
        Some(m) if m.starts_with("example: not checked:") => {
            assert!(
                m.len() > "example: not checked:".len() + 5,
                "a block left unchecked says why: {m}"
            );
            Marker::NotChecked
        }
        _ => Marker::None,
    }
}

fn check_config(dir: &Path, toml: &str) -> Result<String, String> {
    let file = dir.join("gateway.toml");
    // A fragment is checked inside the smallest whole configuration: a
    // listener when it names none.
    let mut table: Table = toml::from_str(toml).map_err(|e| format!("not TOML: {e}"))?;
    let server = table
        .entry("server")
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or("server is not a table")?;
    if !server.contains_key("listen") && !server.contains_key("tls") {
        server.insert("listen".into(), Value::String("127.0.0.1:0".into()));
    }
    let text = in_scratch(&toml::to_string(&table).unwrap(), dir);
    std::fs::write(&file, &text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .arg("check-config")
        .arg(&file)
        .current_dir(dir)
        .env_remove("JMXGATE_CONFIG")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(said)
    } else {
        Err(said)
    }
}

/// Every TOML block of the manual is a configuration (whole, or a
/// fragment of one) that `jmxgate check-config` takes, with the files the
/// chapter shows written beside it; every `<restrict>` block is a policy
/// that loads.
#[test]
fn every_configuration_and_policy_example_is_accepted() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in manual_files() {
        let page = read_page(&file);
        let dir = tempfile::tempdir().unwrap();
        write_fixtures(dir.path());
        for block in &page.blocks {
            if let Marker::File(name) = marker_of(block) {
                let path = dir.path().join(name);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, &block.text).unwrap();
            }
        }
        for block in &page.blocks {
            let at = format!("{}:{}", shown(&file), block.line);
            match (marker_of(block), block.language.as_str()) {
                (Marker::NotChecked, _) => {}
                (Marker::File(name), "xml") => {
                    checked += 1;
                    if let Err(e) = load_policy(&dir.path().join(name)) {
                        problems.push(format!("{at}: policy {name}: {e}"));
                    }
                }
                (Marker::File(_), _) => {}
                (Marker::ClientConfig, _) => {
                    checked += 1;
                    if let Err(e) = load_client_config(dir.path(), &block.text) {
                        problems.push(format!("{at}: client config: {e}"));
                    }
                }
                (Marker::None, "toml") => {
                    checked += 1;
                    if let Err(e) = check_config(dir.path(), &block.text) {
                        problems.push(format!("{at}: check-config says:\n    {}", e.trim()));
                    }
                }
                (Marker::None, "xml") if block.text.contains("<restrict") => {
                    checked += 1;
                    let path = dir.path().join("example-policy.xml");
                    std::fs::write(&path, &block.text).unwrap();
                    if let Err(e) = load_policy(&path) {
                        problems.push(format!("{at}: policy: {e}"));
                    }
                }
                _ => {}
            }
        }
    }
    assert!(
        checked > 15,
        "only {checked} examples found: is the manual there?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The client commands read their settings file (and then fail to reach
/// a gateway that isn't there, which is not the file's fault).
fn load_client_config(dir: &Path, text: &str) -> Result<(), String> {
    let path = dir.join("client.toml");
    std::fs::write(&path, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .arg("version")
        .arg("--client-config")
        .arg(&path)
        .current_dir(dir)
        .env_remove("JMXGATE_URL")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    if said.contains("client config") {
        Err(said.trim().to_string())
    } else {
        Ok(())
    }
}

/// `jmxgate policy check` on a harmless request: allowed or denied, the
/// policy loaded (exit 2 is a policy that doesn't).
fn load_policy(path: &Path) -> Result<(), String> {
    let output = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(["policy", "check", "--policy"])
        .arg(path)
        .args(["--request", r#"{"type":"version"}"#])
        .output()
        .unwrap();
    match output.status.code() {
        Some(0) | Some(1) => Ok(()),
        _ => Err(String::from_utf8_lossy(&output.stderr).trim().to_string()),
    }
}

// ---------------------------------------------------------------------
// The configuration reference against the parser.

const PROBE: &str = "zz_probe";

/// One step into the configuration: a key, an array's item, a map's entry.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Item,
    Entry,
}

fn wrap(path: &[Step], leaf: Value) -> Value {
    let mut value = leaf;
    for step in path.iter().rev() {
        value = match step {
            Step::Key(k) => Value::Table(Table::from_iter([(k.clone(), value)])),
            Step::Item => Value::Array(vec![value]),
            Step::Entry => Value::Table(Table::from_iter([("any".to_string(), value)])),
        };
    }
    value
}

/// The fields a struct at `path` takes, when the probe key finds one:
/// the parser's own "unknown field, expected one of" list, asked of the
/// smallest table it takes there (a struct with a flattened part reports
/// missing required fields before an unknown key).
fn fields_at(path: &[Step]) -> Option<Vec<String>> {
    let mut table = minimal_table_at(path)?;
    table.insert(PROBE.to_string(), Value::Integer(1));
    let message = parsed(path, table.clone()).err()?;
    let rest = message.split(&format!("unknown field `{PROBE}`")).nth(1)?;
    if !rest.starts_with(", expected") {
        // A struct with a flattened part names no fields: each word of
        // the source is tried as a key instead.
        table.remove(PROBE);
        return Some(flattened_fields(path, &table));
    }
    let list = rest.split(", expected ").nth(1).unwrap_or("");
    let list = list.strip_prefix("one of ").unwrap_or(list);
    let list = list.lines().next().unwrap_or("");
    Some(
        list.split(", ")
            .flat_map(|f| f.split(" or "))
            .filter_map(|f| {
                f.trim()
                    .strip_prefix('`')?
                    .split('`')
                    .next()
                    .map(String::from)
            })
            .collect(),
    )
}

fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.split(prefix).nth(1)?;
    rest.strip_prefix('`')?.split('`').next().map(String::from)
}

/// The words of the source that the struct at `path` (given its
/// `required` fields) takes as keys.
fn flattened_fields(path: &[Step], required: &Table) -> Vec<String> {
    source_words()
        .iter()
        .filter(|word| {
            let mut table = required.clone();
            table.insert(word.to_string(), Value::Integer(1));
            parsed(path, table)
                .err()
                .is_none_or(|e| !e.contains(&format!("unknown field `{word}`")))
        })
        .cloned()
        .collect()
}

/// Every identifier-like word in `src/`: the candidates for a key.
fn source_words() -> &'static BTreeSet<String> {
    static WORDS: std::sync::OnceLock<BTreeSet<String>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        let mut words = BTreeSet::new();
        let mut dirs = vec![repo().join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                        if word.starts_with(|c: char| c.is_ascii_lowercase()) {
                            words.insert(word.to_string());
                        }
                    }
                }
            }
        }
        words
    })
}

/// Walks the configuration from its top: every key path the parser
/// takes (`targets[].name` for a key of an array's tables, `x.*.y` for a
/// map's).
fn accepted_keys(path: &mut Vec<Step>, label: &str, out: &mut BTreeSet<String>) {
    let Some(fields) = fields_at(path) else {
        return;
    };
    for field in fields {
        let name = if label.is_empty() {
            field.clone()
        } else {
            format!("{label}.{field}")
        };
        out.insert(name.clone());
        path.push(Step::Key(field));
        if fields_at(path).is_some() {
            accepted_keys(path, &name, out);
        } else {
            path.push(Step::Item);
            if fields_at(path).is_some() {
                accepted_keys(path, &format!("{name}[]"), out);
            } else {
                path.pop();
                path.push(Step::Entry);
                if fields_at(path).is_some() {
                    accepted_keys(path, &format!("{name}.*"), out);
                }
            }
            path.pop();
        }
        path.pop();
    }
}

/// The keys docs/configuration.md documents: each level-2 section headed
/// by a TOML header (`[server]`, `[[targets]]`) or "Top level", and the
/// first cell of each row of its table; a section linking to
/// `#agent-settings` takes those rows too.
fn documented_keys() -> BTreeSet<String> {
    let page = read_page(&repo().join("docs/configuration.md"));
    let rows = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| {
                let cell = l.strip_prefix("| `")?;
                Some(cell.split('`').next()?.to_string())
            })
            .collect()
    };
    let agent_settings: Vec<String> = page
        .sections
        .iter()
        .find(|(name, _)| name == "Agent settings")
        .map(|(_, text)| rows(text))
        .expect("docs/configuration.md has an \"Agent settings\" section");
    let arrays = array_sections(&page.sections);
    let mut keys = BTreeSet::new();
    for (name, text) in &page.sections {
        let prefix = if name == "Top level" {
            String::new()
        } else if let Some(table) = name.strip_prefix("[[").and_then(|n| n.strip_suffix("]]")) {
            let table = within_arrays(table, &arrays);
            keys.insert(table.clone());
            format!("{table}[].")
        } else if let Some(table) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
            let table = within_arrays(table, &arrays);
            keys.insert(table.clone());
            format!("{table}.")
        } else {
            continue;
        };
        let mut own = rows(text);
        if text.contains("(#agent-settings)") {
            own.extend(agent_settings.iter().cloned());
        }
        for key in own {
            keys.insert(format!("{prefix}{key}"));
        }
    }
    keys
}

/// The tables the reference heads as arrays (`[[targets]]`:
/// `targets`).
fn array_sections(sections: &[(String, String)]) -> BTreeSet<String> {
    sections
        .iter()
        .filter_map(|(name, _)| name.strip_prefix("[[")?.strip_suffix("]]"))
        .map(String::from)
        .collect()
}

/// A table's key path with the arrays it sits in marked, as the probe
/// names them: `[[discovery.kubernetes.credentials]]` belongs to the
/// last `[[discovery.kubernetes]]`, so its path is
/// `discovery.kubernetes[].credentials`.
fn within_arrays(table: &str, arrays: &BTreeSet<String>) -> String {
    let parts: Vec<&str> = table.split('.').collect();
    let mut path = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            path.push('.');
        }
        path.push_str(part);
        if i + 1 < parts.len() && arrays.contains(&parts[..=i].join(".")) {
            path.push_str("[]");
        }
    }
    path
}

#[test]
fn the_configuration_reference_lists_exactly_the_keys_the_parser_takes() {
    let mut accepted = BTreeSet::new();
    accepted_keys(&mut Vec::new(), "", &mut accepted);
    // Taken by the loader before the parser: a file's merge order.
    accepted.insert("order".to_string());
    assert!(accepted.len() > 200, "the probe found only {accepted:?}");
    // A table whose keys are all documented in sections of their own
    // (`[auth]`, `[discovery]`) needs no line of its own.
    let documented = documented_keys();
    let containers: BTreeSet<&String> = accepted
        .iter()
        .filter(|k| {
            accepted.iter().any(|other| {
                other.starts_with(&format!("{k}.")) || other.starts_with(&format!("{k}[]."))
            })
        })
        .collect();
    let undocumented: Vec<&String> = accepted
        .iter()
        .filter(|k| !documented.contains(*k) && !containers.contains(k))
        .collect();
    let unknown: Vec<&String> = documented
        .iter()
        .filter(|k| !accepted.contains(*k))
        .collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/configuration.md and the parser disagree.\n\
         Taken by the parser, missing from the reference: {undocumented:?}\n\
         In the reference, refused by the parser: {unknown:?}"
    );
}

// ---------------------------------------------------------------------
// The demo, and the manual's curl lines against it.

/// Starts `scripts/demo.sh` as the README says (with this build's binary,
/// on free ports), then runs every shell block of the manual that talks to
/// the demo's address, and the lines the demo itself prints: each curl
/// must get an answer (HTTP below 400).
#[test]
fn the_manuals_curl_lines_answer_against_the_demo() {
    let work = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", common::free_port());
    let ports: Vec<String> = (0..3).map(|_| common::free_port().to_string()).collect();
    let out = std::fs::File::create(work.path().join("demo.out")).unwrap();
    let demo = Command::new("bash")
        .arg(repo().join("scripts/demo.sh"))
        .env("JMXGATE_DEMO_LISTEN", &listen)
        .env("JMXGATE_DEMO_PORTS", ports.join(" "))
        .env("JMXGATE_DEMO_DIR", work.path().join("demo"))
        .env("JMXGATE_DEMO_BIN", env!("CARGO_BIN_EXE_jmxgate"))
        .env("JMXGATE_DEMO_NO_INSTALL", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .unwrap();
    let mut demo = StopGroup(demo);
    let log = || std::fs::read_to_string(work.path().join("demo.out")).unwrap_or_default();
    let client = std::net::SocketAddr::from((
        [127, 0, 0, 1],
        listen.rsplit(':').next().unwrap().parse().unwrap(),
    ));
    let what = format!("the demo listens on {listen}");
    common::eventually_blocking(&what, Duration::from_secs(300), || {
        if let Ok(Some(status)) = demo.0.try_wait() {
            panic!(
                "scripts/demo.sh ended ({status}) before serving:\n{}",
                log()
            );
        }
        if std::net::TcpStream::connect(client).is_ok() {
            Ok(())
        } else {
            Err(log())
        }
    });

    // The lines the demo prints to paste.
    let printed = log();
    let pasted: String = printed
        .split("Paste these:")
        .nth(1)
        .and_then(|t| t.split("Ctrl-C stops").next())
        .expect("the demo prints lines to paste")
        .to_string();
    let mut problems = Vec::new();
    if let Err(e) = run_shell(&pasted, &listen, work.path()) {
        problems.push(format!("the demo's own lines: {e}"));
    }
    let mut ran = 0;
    for file in manual_files() {
        for block in read_page(&file).blocks {
            // The address in a command, not only in a comment.
            let talks_to_demo = block.text.lines().any(|line| {
                let command = line.split(" #").next().unwrap_or("");
                !command.trim_start().starts_with('#')
                    && (command.contains("127.0.0.1:8080") || command.contains("localhost:8080"))
            });
            if !matches!(block.language.as_str(), "sh" | "console" | "bash")
                || !talks_to_demo
                || matches!(marker_of(&block), Marker::NotChecked)
            {
                continue;
            }
            ran += 1;
            if let Err(e) = run_shell(&block.text, &listen, work.path()) {
                problems.push(format!("{}:{}: {e}", shown(&file), block.line));
            }
        }
    }
    assert!(ran >= 3, "only {ran} shell blocks talk to the demo");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// Runs shell text as written, with the demo's address for the default
/// one and this build for `target/release/jmxgate`; curl fails on an
/// HTTP error.
fn run_shell(text: &str, listen: &str, dir: &Path) -> Result<(), String> {
    let text = text
        .replace("127.0.0.1:8080", listen)
        .replace("localhost:8080", listen)
        .replace("target/release/jmxgate", env!("CARGO_BIN_EXE_jmxgate"));
    let script = format!(
        "set -eu\n\
         curl() {{ command curl --silent --show-error --fail-with-body --max-time 60 \"$@\"; }}\n\
         {text}\n"
    );
    // `jmxgate` on the PATH is this build.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_jmxgate")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("JMXGATE_URL")
        .output()
        .unwrap();
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}\n{}\n--- stdout\n{}\n--- stderr\n{}",
            output.status.code(),
            text.trim(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Stops the demo's whole process group (the script, its JVMs and the
/// gateway) and waits for the script, which waits for its children.
struct StopGroup(std::process::Child);

impl Drop for StopGroup {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let stopped =
            common::try_eventually_blocking(Duration::from_secs(60), || match self.0.try_wait() {
                Ok(Some(_)) => Ok(()),
                _ => Err("still running".to_string()),
            });
        if stopped.is_ok() {
            return;
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

use std::os::unix::process::CommandExt;

/// A section's path in the configuration, from its heading in the
/// reference (the agent settings are checked where `[target_defaults]`
/// takes them); a table within an array section (`arrays`) is in its
/// last item.
fn section_path(heading: &str, arrays: &BTreeSet<String>) -> Option<Vec<Step>> {
    let keys = |t: &str| {
        let parts: Vec<&str> = t.split('.').collect();
        let mut path = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            path.push(Step::Key(part.to_string()));
            if i + 1 < parts.len() && arrays.contains(&parts[..=i].join(".")) {
                path.push(Step::Item);
            }
        }
        path
    };
    if let Some(t) = heading
        .strip_prefix("[[")
        .and_then(|n| n.strip_suffix("]]"))
    {
        let mut path = keys(t);
        path.push(Step::Item);
        Some(path)
    } else if let Some(t) = heading.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(keys(t))
    } else if heading == "Agent settings" {
        Some(keys("target_defaults"))
    } else {
        None
    }
}

/// `leaf` at `path` in a configuration that has a listener.
fn whole(path: &[Step], leaf: Value) -> Value {
    let mut root = wrap(path, leaf);
    let server = root
        .as_table_mut()
        .unwrap()
        .entry("server")
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .unwrap();
    if !server.contains_key("listen") && !server.contains_key("tls") {
        server.insert("listen".into(), Value::String("127.0.0.1:1".into()));
    }
    // `[[audit.sinks]]` lives in `[audit]`, which needs its directory.
    if let Some(Value::Table(audit)) = root.as_table_mut().unwrap().get_mut("audit") {
        audit
            .entry("dir")
            .or_insert_with(|| Value::String("/tmp".into()));
    }
    root
}

fn parsed(path: &[Step], leaf: Table) -> Result<String, String> {
    whole(path, Value::Table(leaf))
        .try_into::<jmxgate::Config>()
        .map(|config| format!("{config:?}"))
        .map_err(|e| e.to_string())
}

/// The smallest table the parser takes at `path`: its required keys with
/// some value of their type.
fn minimal_table_at(path: &[Step]) -> Option<Table> {
    let mut table = Table::new();
    for _ in 0..10 {
        let Err(message) = parsed(path, table.clone()) else {
            return Some(table);
        };
        let missing = quoted_after(&message, "missing field ")?;
        let candidates = [
            Value::String("http://127.0.0.1:1/jolokia".into()),
            Value::String("127.0.0.1:1".into()),
            Value::String("a".into()),
            Value::Integer(1),
            Value::Boolean(true),
            Value::Array(vec![Value::String("a".into())]),
            Value::Table(Table::new()),
        ];
        table = candidates.into_iter().find_map(|candidate| {
            let mut tried = table.clone();
            tried.insert(missing.clone(), candidate);
            match parsed(path, tried.clone()) {
                Ok(_) => Some(tried),
                Err(e) if e.contains("missing field") && !e.contains(&format!("`{missing}`")) => {
                    Some(tried)
                }
                // A required choice (`membership`): its first variant.
                Err(e) if e.contains("unknown variant") => {
                    let variant = quoted_after(&e, "expected ")
                        .or_else(|| quoted_after(&e, "expected one of "))?;
                    tried.insert(missing.clone(), Value::String(variant));
                    parsed(path, tried.clone()).is_ok().then_some(tried)
                }
                Err(_) => None,
            }
        })?;
    }
    None
}

/// Every default the reference gives as one value (`` `"10s"` ``,
/// `` `1024` (…) ``) is what the parser makes of the key left out: the
/// same configuration as with that value written. A key the parser leaves
/// unset (`None`) for the code to fill later is taken at its word.
#[test]
fn the_configuration_references_defaults_are_the_parsers() {
    let page = read_page(&repo().join("docs/configuration.md"));
    let arrays = array_sections(&page.sections);
    let (mut checked, mut problems) = (0, Vec::new());
    for (heading, text) in &page.sections {
        let Some(path) = section_path(heading, &arrays) else {
            continue;
        };
        for row in text.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split(" | ").map(str::trim).collect();
            let key = cells[0]
                .trim_start_matches("| `")
                .split('`')
                .next()
                .unwrap();
            // One value, perhaps with a gloss in parentheses.
            let Some(literal) = cells
                .get(1)
                .and_then(|d| d.strip_prefix('`'))
                .and_then(|d| d.split_once('`'))
                .filter(|(_, after)| after.is_empty() || after.starts_with(" ("))
                .map(|(literal, _)| literal)
            else {
                continue;
            };
            let Ok(mut value) = toml::from_str::<Table>(&format!("v = {literal}")) else {
                continue; // a word, not a value (`text`): described, not checked
            };
            let Some(without) = minimal_table_at(&path) else {
                problems.push(format!("{heading}: no configuration takes this section"));
                break;
            };
            let mut with = without.clone();
            with.insert(key.to_string(), value.remove("v").unwrap());
            checked += 1;
            match (parsed(&path, with), parsed(&path, without)) {
                (Ok(a), Ok(b)) if a == b => {}
                (Ok(a), Ok(b)) => {
                    let same = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                    if !(b[same..].starts_with("None") && a[same..].starts_with("Some(")) {
                        problems.push(format!(
                            "{heading} {key}: the reference says {literal}, the parser's default differs"
                        ));
                    }
                }
                (Err(e), _) => problems.push(format!("{heading} {key} = {literal}: refused: {e}")),
                (_, Err(e)) => problems.push(format!("{heading}: {e}")),
            }
        }
    }
    assert!(checked > 80, "only {checked} defaults checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------
// Getting started, run as a new user would.

/// The first configuration of Getting started, with the chapter's users
/// file (alice's hash made anew) and the repository's policies, its two
/// targets at real agents and its HTTPS listener left out (no
/// certificate to hand): it "lets anyone read, and lets Alice, with her
/// password, run operations on the orders JVMs", as its text says.
#[tokio::test(flavor = "multi_thread")]
async fn the_first_configuration_does_what_its_text_says() {
    let page = read_page(&repo().join("docs/getting-started.md"));
    let first = page
        .blocks
        .iter()
        .find(|b| b.language == "toml" && b.text.contains("anonymous_role"))
        .expect("Getting started shows a first configuration");
    let mut table: Table = toml::from_str(&first.text).unwrap();
    let [a, b, _] = common::shared_agents();
    for (target, agent) in table["targets"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .zip([a, b])
    {
        target.as_table_mut().unwrap()["url"] = Value::String(agent.url());
    }
    let server = table["server"].as_table_mut().unwrap();
    server.remove("tls");
    server.insert("listen".into(), Value::String("127.0.0.1:0".into()));
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("policies"), &dir.path().join("policies"));
    let hash = jmxgate::pipeline::authenticate::basic::hash_password("her password").unwrap();
    std::fs::write(
        dir.path().join("users.toml"),
        format!("[[users]]\nname = \"alice\"\npassword_hash = \"{hash}\"\nroles = [\"orders-operators\"]\n"),
    )
    .unwrap();
    let file = dir.path().join("gateway.toml");
    std::fs::write(&file, toml::to_string(&table).unwrap()).unwrap();
    let gw = common::Gateway::start_from_file(&file).await;

    let heap = "read/java.lang:type=Memory/HeapMemoryUsage/used";
    let gc =
        serde_json::json!({"type": "exec", "mbean": "java.lang:type=Memory", "operation": "gc"});
    let status = |v: &serde_json::Value| v["status"].as_u64().unwrap_or(0);
    // Anyone reads, both targets.
    for name in ["orders-1", "billing-1"] {
        let r = gw
            .http
            .get(gw.url(&format!("/jolokia/targets/{name}/{heap}")));
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 200, "{name}");
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(status(&v), 200, "{name}: {v}");
        assert!(v["value"].as_u64().is_some(), "{v}");
    }
    let version = gw
        .http
        .get(gw.url("/jolokia/version"))
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), 200);
    // But nobody without credentials runs gc.
    let anonymous =
        common::json_of(gw.http.post(gw.url("/jolokia/targets/orders-1")).json(&gc)).await;
    assert_eq!(status(&anonymous), 403, "{anonymous}");
    // Alice reads as an operator reads (GET included) and runs gc on the
    // orders JVM, not on billing.
    let alice = |req: reqwest::RequestBuilder| req.basic_auth("alice", Some("her password"));
    for path in [
        "/jolokia/version".to_string(),
        format!("/jolokia/targets/orders-1/{heap}"),
    ] {
        let v = common::json_of(alice(gw.http.get(gw.url(&path)))).await;
        assert_eq!(status(&v), 200, "{path}: {v}");
    }
    // billing-1 is no target of hers: unknown to her, as to a stranger.
    for (name, want) in [("orders-1", 200), ("billing-1", 404)] {
        let url = gw.url(&format!("/jolokia/targets/{name}"));
        let v = common::json_of(alice(gw.http.post(url)).json(&gc)).await;
        assert_eq!(status(&v), want, "gc on {name}: {v}");
    }
    // As Hawtio asks and runs it: with the signature.
    let acl = "hawtio:type=security,area=jmx,name=JmxgateRBAC";
    let hawtio = common::json_of(
        alice(gw.http.post(gw.url("/jolokia/targets/orders-1"))).json(&serde_json::json!([
            {"type":"exec","mbean":acl,"operation":"canInvoke(java.util.Map)",
             "arguments":[{"java.lang:type=Memory":["gc()"]}]},
            {"type":"exec","mbean":"java.lang:type=Memory","operation":"gc()"},
        ])),
    )
    .await;
    assert_eq!(
        hawtio[0]["value"]["java.lang:type=Memory"]["gc()"]["CanInvoke"], true,
        "{hawtio}"
    );
    assert_eq!(status(&hawtio[1]), 200, "{hawtio}");
    let wrong = gw
        .http
        .get(gw.url("/jolokia/version"))
        .basic_auth("alice", Some("not hers"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
}
