//! Layered loading, apart from the schema: several files merged by
//! `order`, then `JMXGATE__` environment overrides and `--set` overrides,
//! into one TOML table that [`Config`] is read from.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError};

/// Where a configuration comes from: one or more files merged by their
/// `order` value (then by position), environment overrides with the
/// `JMXGATE__` prefix (`JMXGATE__SERVER__LISTEN=0.0.0.0:8080`), and
/// `--set key=value` overrides, applied in that order.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    pub files: Vec<PathBuf>,
    pub sets: Vec<String>,
}

/// The prefix of environment overrides; `__` separates key levels.
pub const ENV_PREFIX: &str = "JMXGATE__";

impl From<PathBuf> for ConfigSource {
    fn from(path: PathBuf) -> ConfigSource {
        ConfigSource::file(&path)
    }
}

impl ConfigSource {
    pub fn file(path: &Path) -> ConfigSource {
        ConfigSource {
            files: vec![path.to_path_buf()],
            sets: Vec::new(),
        }
    }

    /// A short name for messages.
    pub fn describe(&self) -> String {
        self.files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// Reads, merges, overrides, parses and checks.
    pub fn load(&self) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .collect();
        self.load_with_env(&env)
    }

    pub fn load_with_env(&self, env: &[(String, String)]) -> Result<Config, ConfigError> {
        let merged = self.merged(env)?;
        let label = PathBuf::from(self.describe());
        let mut config: Config =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError {
                    file: label.clone(),
                    problems: vec![e.to_string().trim_end().to_string()],
                })?;
        config.add_inventories().map_err(|problems| ConfigError {
            file: label.clone(),
            problems,
        })?;
        config.validate().map_err(|problems| ConfigError {
            file: label,
            problems,
        })
    }

    /// Every file the configuration names (policies, users, keys,
    /// certificates, passwords), resolved; not directories. Empty when the
    /// configuration can't be read.
    pub fn named_files(&self) -> Vec<PathBuf> {
        fn walk(table: &toml::Table, out: &mut Vec<PathBuf>) {
            for (key, value) in table {
                match value {
                    toml::Value::String(s) if is_path_key(key) && !is_written_key(key) => {
                        out.push(PathBuf::from(s))
                    }
                    toml::Value::Table(t) => walk(t, out),
                    toml::Value::Array(items) => items
                        .iter()
                        .filter_map(toml::Value::as_table)
                        .for_each(|t| walk(t, out)),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        if let Ok(merged) = self.merged(&[]) {
            walk(&merged, &mut out);
            out.extend(inventories_files(&merged));
            out.extend(otel_rules_files(&merged));
        }
        out
    }

    /// The files merged by `order`, with environment and `--set` overrides.
    fn merged(&self, env: &[(String, String)]) -> Result<toml::Table, ConfigError> {
        let fail = |file: PathBuf, problems| ConfigError { file, problems };
        let label = PathBuf::from(self.describe());
        let mut layers = Vec::new();
        for (position, path) in self.files.iter().enumerate() {
            let text = std::fs::read_to_string(path)
                .map_err(|e| fail(path.clone(), vec![format!("cannot read the file: {e}")]))?;
            let mut table: toml::Table = toml::from_str(&text).map_err(|e| {
                fail(
                    path.clone(),
                    vec![e.to_string().trim_end().replace('\n', "\n    ")],
                )
            })?;
            let order = match table.remove("order") {
                None => 0,
                Some(toml::Value::Integer(i)) => i,
                Some(_) => {
                    return Err(fail(path.clone(), vec!["order: must be an integer".into()]))
                }
            };
            let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
            resolve_paths(&mut table, &base);
            layers.push((order, position, table));
        }
        layers.sort_by_key(|(order, position, _)| (*order, *position));
        let mut merged = toml::Table::new();
        for (_, _, table) in layers {
            merge(&mut merged, table);
        }
        let mut overrides = Vec::new();
        for (key, value) in env {
            let path = key[ENV_PREFIX.len()..]
                .to_ascii_lowercase()
                .replace("__", ".");
            overrides.push((format!("environment {key}"), path, value.clone()));
        }
        for set in &self.sets {
            let (path, value) = set.split_once('=').ok_or_else(|| {
                fail(
                    label.clone(),
                    vec![format!("--set {set}: expected key=value")],
                )
            })?;
            overrides.push((
                format!("--set {set}"),
                path.trim().to_string(),
                value.to_string(),
            ));
        }
        for (origin, path, value) in overrides {
            set_path(&mut merged, &path, parse_value(&value))
                .map_err(|e| fail(label.clone(), vec![format!("{origin}: {e}")]))?;
        }
        Ok(merged)
    }
}

/// The files the targets of each `[[inventory]]` name (passwords,
/// certificates), resolved against their inventory file: a change to one
/// reloads as a change to a file the configuration names does. An
/// inventory that doesn't load names none (its own file is watched).
/// The OpenTelemetry rules files `[[prometheus.modules]] otel_rules`
/// names by path (a built-in system's name reads no file).
fn otel_rules_files(merged: &toml::Table) -> Vec<PathBuf> {
    let modules = merged
        .get("prometheus")
        .and_then(|p| p.get("modules"))
        .and_then(toml::Value::as_array);
    modules
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("otel_rules").and_then(toml::Value::as_array))
        .flatten()
        .filter_map(toml::Value::as_str)
        .filter(|e| crate::exporter::otel::is_path(e))
        .map(PathBuf::from)
        .collect()
}

fn inventories_files(merged: &toml::Table) -> Vec<PathBuf> {
    let Some(toml::Value::Array(inventories)) = merged.get("inventory") else {
        return Vec::new();
    };
    inventories
        .iter()
        .filter_map(|entry| {
            entry
                .clone()
                .try_into::<crate::inventory::InventoryConfig>()
                .ok()
        })
        .filter_map(|inventory| crate::inventory::load(&inventory).ok())
        .flatten()
        .flat_map(|target| {
            target
                .agent
                .files()
                .map(Path::to_path_buf)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Keys holding file or directory paths, resolved against the folder of the
/// file that sets them.
fn is_path_key(key: &str) -> bool {
    // `file`: a secret read from a file (`{ file = "…" }`, OTLP headers).
    key.ends_with("_file")
        || key == "file"
        || key == "dir"
        || key == "policy"
        || key == "kubeconfig"
        // `[console] hawtio`: a directory (a URL is left as it is).
        || key == "hawtio"
}

/// A path key naming what the gateway writes itself (the access store's
/// SQLite file, the audit directory): not configuration, so its changes
/// reload nothing.
fn is_written_key(key: &str) -> bool {
    key == "sqlite_file" || key == "dir"
}

fn resolve_paths(table: &mut toml::Table, base: &Path) {
    for (key, value) in table.iter_mut() {
        match value {
            toml::Value::String(s)
                if is_path_key(key)
                    && Path::new(s.as_str()).is_relative()
                    && !s.contains("://") =>
            {
                *s = base.join(s.as_str()).display().to_string();
            }
            toml::Value::Table(t) => resolve_paths(t, base),
            toml::Value::Array(items) => {
                for item in items {
                    match item {
                        toml::Value::Table(t) => resolve_paths(t, base),
                        // OpenTelemetry rules files by path, beside the
                        // built-in ones by name (a misspelt name stays as
                        // written, so check-config can say so).
                        toml::Value::String(s)
                            if key == "otel_rules"
                                && crate::exporter::otel::is_path(s)
                                && Path::new(s.as_str()).is_relative() =>
                        {
                            *s = base.join(s.as_str()).display().to_string();
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// Tables merge key by key; arrays of tables (targets, roles) are
/// appended; anything else is replaced by the later layer.
fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (Some(toml::Value::Array(a)), toml::Value::Array(b))
                if b.iter().all(toml::Value::is_table) && a.iter().all(toml::Value::is_table) =>
            {
                a.extend(b)
            }
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// An override's value: TOML when it parses as a value (`8080`, `true`,
/// `["a","b"]`, `"quoted"`), else the text itself.
fn parse_value(text: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let mut parts = path.split('.').peekable();
    let mut current = table;
    while let Some(part) = parts.next() {
        if part.is_empty() {
            return Err(format!("\"{path}\" is not a key path like server.listen"));
        }
        if parts.peek().is_none() {
            current.insert(part.to_string(), value);
            return Ok(());
        }
        let next = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = next
            .as_table_mut()
            .ok_or_else(|| format!("\"{part}\" in {path} is not a table"))?;
    }
    Ok(())
}

#[cfg(test)]
mod layered_tests {
    use super::*;

    #[test]
    fn files_merge_by_order_and_overrides_win() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base.toml");
        let site = dir.path().join("sub").join("site.toml");
        std::fs::create_dir_all(site.parent().unwrap()).unwrap();
        std::fs::write(
            &base,
            "order = 10\n[server]\nlisten = \"127.0.0.1:1\"\nmax_bulk_items = 5\n[[targets]]\nname = \"a\"\nurl = \"http://h/j\"\n",
        )
        .unwrap();
        std::fs::write(
            &site,
            "order = 1\n[server]\nlisten = \"127.0.0.1:2\"\n[[targets]]\nname = \"b\"\nurl = \"http://h2/j\"\npassword_file = \"pw.txt\"\nuser = \"u\"\n",
        )
        .unwrap();
        let source = ConfigSource {
            files: vec![base, site.clone()],
            sets: vec!["server.max_body_bytes=1000".into()],
        };
        let env = vec![(
            "JMXGATE__SERVER__DEFAULT_TARGET".to_string(),
            "b".to_string(),
        )];
        let c = source.load_with_env(&env).unwrap();
        // base (order 10) comes after site (order 1): its listen wins.
        assert_eq!(c.server.listen.unwrap().port(), 1);
        assert_eq!(c.server.max_bulk_items, 5);
        assert_eq!(c.server.max_body_bytes, 1000);
        assert_eq!(c.server.default_target.as_deref(), Some("b"));
        let names: Vec<&str> = c.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["b", "a"]);
        assert_eq!(
            c.targets[0].agent.password_file.as_deref(),
            Some(site.parent().unwrap().join("pw.txt").as_path())
        );
    }

    #[test]
    fn the_files_an_inventorys_targets_name_are_watched_too() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("gateway.toml");
        std::fs::create_dir_all(dir.path().join("inv")).unwrap();
        std::fs::write(
            &config,
            "[server]\nlisten = \"127.0.0.1:1\"\n[[inventory]]\ntargets_file = \"inv/kafka.yaml\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("inv/kafka.yaml"),
            "- name: kafka-1\n  url: https://10.0.0.21:8778/jolokia\n  user: jolokia\n  \
             password_file: secrets/kafka.pw\n  ca_file: /etc/ca.pem\n",
        )
        .unwrap();
        let named = ConfigSource::file(&config).named_files();
        assert!(
            named.contains(&dir.path().join("inv/secrets/kafka.pw")),
            "{named:?}"
        );
        assert!(named.contains(&PathBuf::from("/etc/ca.pem")), "{named:?}");
        assert!(
            named.contains(&dir.path().join("inv/kafka.yaml")),
            "{named:?}"
        );
    }

    /// Files the gateway writes beside its configuration (the access
    /// store, the audit directory) are not watched: writing them is no
    /// change of configuration.
    #[test]
    fn the_files_the_gateway_writes_are_not_watched() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("gateway.toml");
        std::fs::write(
            &config,
            "[server]\nlisten = \"127.0.0.1:1\"\n[access.store]\nsqlite_file = \"access.db\"\n\
             [audit]\ndir = \".\"\nsigning_key_file = \"audit.key\"\n",
        )
        .unwrap();
        let named = ConfigSource::file(&config).named_files();
        assert_eq!(named, [dir.path().join("audit.key")]);
    }

    /// OpenTelemetry rules files named by path are read beside the
    /// configuration and watched; built-in ones by name read no file.
    #[test]
    fn opentelemetry_rules_files_are_resolved_and_watched() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("gateway.toml");
        std::fs::write(
            &config,
            "[server]\nlisten = \"127.0.0.1:1\"\n[[prometheus.modules]]\nname = \"otel\"\n\
             otel_rules = [\"jvm\", \"rules/mine.yaml\", \"/etc/jmxgate/other.yaml\", \"tomcta\"]\n",
        )
        .unwrap();
        let named = ConfigSource::file(&config).named_files();
        assert_eq!(
            named,
            [
                dir.path().join("rules/mine.yaml"),
                PathBuf::from("/etc/jmxgate/other.yaml")
            ]
        );
    }

    #[test]
    fn bad_overrides_and_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("g.toml");
        std::fs::write(&f, "[server]\nlisten = \"127.0.0.1:1\"\n").unwrap();
        let e = ConfigSource {
            files: vec![f.clone()],
            sets: vec!["server.listen".into()],
        }
        .load_with_env(&[])
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("--set server.listen: expected key=value"),
            "{e}"
        );
        let e = ConfigSource::file(&f)
            .load_with_env(&[("JMXGATE__SERVER__LISTN".into(), "x".into())])
            .unwrap_err();
        assert!(e.to_string().contains("listn"), "{e}");
    }
}
