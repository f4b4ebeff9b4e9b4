//! Inventory files: targets kept outside the main configuration, in TOML,
//! JSON or YAML (by extension), as a CMDB export or a deploy tool writes
//! them. They are read with the configuration, so `check-config` checks
//! them, reload watches them, and a broken one (unreadable, or naming a
//! target twice) keeps the previous fleet. Each file is one source of the
//! fleet (`inventory:<targets_file>`, see the fleet's `sources`): a
//! name it shares with `[[targets]]` or an earlier source is kept there.
//!
//! ```toml
//! [[inventory]]
//! targets_file = "inventory/kafka.yaml"
//! labels = { source = "cmdb" }   # added to every target in the file
//! ```
//!
//! The file holds a list of targets, with the keys of `[[targets]]`: as
//! `targets = [...]` (TOML `[[targets]]`, a JSON object or a YAML mapping)
//! or, in JSON and YAML, as a bare list.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::agent_settings::TargetConfig;

/// `[[inventory]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryConfig {
    pub targets_file: PathBuf,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    targets: Vec<TargetConfig>,
}

/// Whether a JSON or YAML document is a bare list (else a mapping with
/// `targets`); decided up front so errors point at the real problem.
fn is_list(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---")
        .is_some_and(|l| l.starts_with('[') || l.starts_with('-'))
}

/// The targets of one inventory, its labels added and the paths inside it
/// made relative to the file.
pub fn load(inventory: &InventoryConfig) -> Result<Vec<TargetConfig>, String> {
    let path = &inventory.targets_file;
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("inventory {}: {e}", path.display()))?;
    let mut targets =
        parse(path, &text).map_err(|e| format!("inventory {}: {e}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    for t in &mut targets {
        t.origin = crate::agent_settings::Origin::Inventory;
        if !inventory.labels.is_empty() {
            let mut labels = t.labels.to_map();
            for (k, v) in &inventory.labels {
                labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
            t.labels = labels.into();
        }
        std::sync::Arc::make_mut(&mut t.agent).make_paths_relative_to(base);
    }
    Ok(targets)
}

/// [`load`], and each target checked as a `[[targets]]` entry is: a name
/// the file lists twice, a bad name or URL, is an error naming the file.
pub fn load_checked(inventory: &InventoryConfig) -> Result<Vec<TargetConfig>, Vec<String>> {
    let file = inventory.targets_file.display();
    let targets = load(inventory).map_err(|e| vec![e])?;
    let mut problems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut once = Vec::with_capacity(targets.len());
    for t in &targets {
        if seen.insert(t.name.as_str()) {
            once.push(t.clone());
        } else {
            problems.push(format!(
                "inventory {file}: target \"{}\" is listed twice in this file",
                t.name
            ));
        }
    }
    // The defaults are the configuration's to check.
    problems.extend(
        crate::agent_settings::problems(&once, &Default::default())
            .into_iter()
            .map(|p| format!("inventory {file}: {p}")),
    );
    if problems.is_empty() {
        Ok(targets)
    } else {
        Err(problems)
    }
}

/// Parses by extension: `.toml`, `.json`, `.yaml`/`.yml`.
pub fn parse(path: &Path, text: &str) -> Result<Vec<TargetConfig>, String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "toml" => toml::from_str::<Table>(text)
            .map(|t| t.targets)
            .map_err(|e| e.to_string().trim_end().to_string()),
        "json" if is_list(text) => serde_json::from_str(text).map_err(|e| e.to_string()),
        "json" => serde_json::from_str::<Table>(text)
            .map(|t| t.targets)
            .map_err(|e| e.to_string()),
        "yaml" | "yml" if is_list(text) => serde_saphyr::from_str(text).map_err(|e| e.to_string()),
        "yaml" | "yml" => serde_saphyr::from_str::<Table>(text)
            .map(|t| t.targets)
            .map_err(|e| e.to_string()),
        other => Err(format!(
            "unknown format {other:?}: name the file .toml, .json, .yaml or .yml"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ts: &[TargetConfig]) -> Vec<&str> {
        ts.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn three_formats_one_shape() {
        let toml = "[[targets]]\nname = \"a\"\nurl = \"http://h:1/jolokia\"\nlabels = { env = \"prod\" }\n";
        let json = r#"[{"name":"a","url":"http://h:1/jolokia","labels":{"env":"prod"}}]"#;
        let json_table = r#"{"targets":[{"name":"a","url":"http://h:1/jolokia"}]}"#;
        let yaml = "targets:\n  - name: a\n    url: http://h:1/jolokia\n    request_timeout: 3s\n";
        let yaml_list = "- name: a\n  url: http://h:1/jolokia\n";
        for (file, text) in [
            ("x.toml", toml),
            ("x.json", json),
            ("x.json", json_table),
            ("x.yaml", yaml),
            ("x.yml", yaml_list),
        ] {
            let ts = parse(Path::new(file), text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(names(&ts), vec!["a"], "{file}");
        }
        let ts = parse(Path::new("x.yaml"), yaml).unwrap();
        assert_eq!(
            ts[0].agent.request_timeout,
            Some(std::time::Duration::from_secs(3))
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = parse(Path::new("x.csv"), "").unwrap_err();
        assert!(e.contains(".yaml"), "{e}");
        let e = parse(Path::new("x.json"), r#"[{"name":"a"}]"#).unwrap_err();
        assert!(e.contains("url"), "{e}");
        let e = parse(
            Path::new("x.yaml"),
            "targets:\n  - name: a\n    url: u\n    bogus: 1\n",
        )
        .unwrap_err();
        assert!(e.contains("bogus"), "{e}");
    }
}
