//! `[prometheus]`: the scrape endpoint's own section of the configuration
//! (a leaf: `config` composes it without importing the door), and its
//! modules compiled from their rules files.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::exporter::{otel, Module, Rules};

/// `[prometheus]`: the multi-target scrape endpoint on every listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Serve scrapes at all.
    pub enabled: bool,
    /// Where, on the gateway's listeners.
    pub path: String,
    /// The label naming each sample's target.
    pub target_label: String,
    /// Taken off the scraper's `X-Prometheus-Scrape-Timeout-Seconds`, so
    /// the answer is written before the scraper gives up.
    #[serde(with = "humantime_serde")]
    pub timeout_offset: Duration,
    /// The time a scrape may take when the scraper doesn't say.
    #[serde(with = "humantime_serde")]
    pub default_timeout: Duration,
    /// Targets scraped at once for one selector.
    pub max_concurrent_targets: usize,
    /// Memory for plans and the rule mappings scrapes remember, weighed by
    /// what each holds as it grows; the least used go first.
    pub plan_cache_bytes: u64,
    /// Samples one target may give; over it, the target's scrape fails.
    pub sample_limit: usize,
    /// Labels one sample may carry, the target's own label counted.
    pub label_limit: usize,
    /// Bytes of a metric or label name.
    pub name_length_limit: usize,
    /// Bytes of a label value.
    pub label_value_length_limit: usize,
    /// Bytes of metrics text one target may add to an answer.
    pub body_size_limit: u64,
    /// Bytes of the text a value's rules are matched against (MBean name,
    /// attribute, value); a longer value is left out and counted.
    pub match_length_limit: usize,
    /// Threads that make plans and samples, off the serving workers;
    /// 0: half the CPUs, at least one.
    pub cpu_threads: usize,
    /// Rules files by name (`module=` of a scrape).
    pub modules: Vec<ModuleConfig>,
    /// Targets one answer of `<path>/sd` may list; more: ask for shards.
    pub sd_max_targets: usize,
}

/// One `[[prometheus.modules]]`: a jmx_exporter configuration file, or
/// OpenTelemetry's JMX rules files (one of the two).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleConfig {
    pub name: String,
    /// A jmx_exporter YAML configuration, read unchanged.
    #[serde(default)]
    pub rules_file: Option<PathBuf>,
    /// OpenTelemetry JMX rules: built-in systems' files by name (`jvm`,
    /// `tomcat`, …) or paths, read unchanged, as
    /// `otel.jmx.target.system` and `otel.jmx.config` take them.
    #[serde(default)]
    pub otel_rules: Vec<String>,
    /// Only these metrics of the OpenTelemetry rules (`*`, `?` wildcards).
    #[serde(default)]
    pub otel_included: Vec<String>,
    /// Not these metrics of the OpenTelemetry rules.
    #[serde(default)]
    pub otel_excluded: Vec<String>,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        // One target's bounds: the exporter's own defaults.
        let bounds = crate::exporter::limits::Limits::default();
        PrometheusConfig {
            enabled: true,
            path: "/prometheus".into(),
            target_label: "target".into(),
            timeout_offset: Duration::from_millis(500),
            default_timeout: Duration::from_secs(10),
            max_concurrent_targets: 32,
            plan_cache_bytes: 256 << 20,
            sample_limit: bounds.sample_limit,
            label_limit: bounds.label_limit,
            name_length_limit: bounds.name_length_limit,
            label_value_length_limit: bounds.label_value_length_limit,
            body_size_limit: bounds.body_size_limit as u64,
            match_length_limit: bounds.match_length_limit,
            cpu_threads: 0,
            modules: Vec::new(),
            sd_max_targets: 10_000,
        }
    }
}

impl PrometheusConfig {
    /// One target's bounds, with the scrape's deadline.
    pub fn limits(&self, deadline: std::time::Instant) -> crate::exporter::limits::Limits {
        crate::exporter::limits::Limits {
            sample_limit: self.sample_limit,
            label_limit: self.label_limit,
            name_length_limit: self.name_length_limit,
            label_value_length_limit: self.label_value_length_limit,
            body_size_limit: usize::try_from(self.body_size_limit).unwrap_or(usize::MAX),
            match_length_limit: self.match_length_limit,
            deadline: Some(deadline),
        }
    }

    /// The threads for plans and samples.
    pub fn cpu_threads(&self) -> usize {
        if self.cpu_threads > 0 {
            return self.cpu_threads;
        }
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        (cpus / 2).max(1)
    }
}

/// The module a scrape without `module=` uses.
pub const DEFAULT_MODULE: &str = "default";

impl PrometheusConfig {
    /// Every problem with the section, each naming its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.path.starts_with('/') || self.path.len() < 2 {
            problems.push(format!(
                "prometheus.path: {:?} must be a path below the root, like \"/prometheus\"",
                self.path
            ));
        }
        let legal = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if self.target_label.is_empty()
            || !self.target_label.chars().all(legal)
            || self.target_label.starts_with(|c: char| c.is_ascii_digit())
            || self.target_label.starts_with("__")
        {
            problems.push(format!(
                "prometheus.target_label: {:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)",
                self.target_label
            ));
        }
        for (key, value) in [
            ("max_concurrent_targets", self.max_concurrent_targets as u64),
            ("sample_limit", self.sample_limit as u64),
            ("label_limit", self.label_limit as u64),
            ("name_length_limit", self.name_length_limit as u64),
            (
                "label_value_length_limit",
                self.label_value_length_limit as u64,
            ),
            ("body_size_limit", self.body_size_limit),
            ("match_length_limit", self.match_length_limit as u64),
            ("sd_max_targets", self.sd_max_targets as u64),
        ] {
            if value == 0 {
                problems.push(format!("prometheus.{key}: must be greater than zero"));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (i, m) in self.modules.iter().enumerate() {
            if m.name.is_empty() {
                problems.push(format!("prometheus.modules[{i}].name: must not be empty"));
            } else if !seen.insert(m.name.as_str()) {
                problems.push(format!(
                    "prometheus.modules[{i}].name: \"{}\" is used twice",
                    m.name
                ));
            }
            // Every rules file is read and compiled now, so a check names
            // each broken one, and every problem in it.
            if let Err(mut e) = compile(i, m) {
                problems.append(&mut e);
            }
        }
        problems
    }

    /// The modules by name, each rules file read and compiled; the error
    /// names the module, the file and what is wrong in it.
    pub fn modules(&self) -> Result<Modules, String> {
        let mut by_name = HashMap::new();
        for (i, m) in self.modules.iter().enumerate() {
            let module = compile(i, m).map_err(|e| e.join("; "))?;
            for note in module.ignored() {
                // A jmx_exporter file's keys not used; OpenTelemetry
                // rules' parts that can't run here.
                match &m.rules_file {
                    Some(file) => tracing::info!(
                        module = %m.name,
                        "prometheus: rules file {}: ignoring {note}",
                        file.display()
                    ),
                    None => tracing::warn!(module = %m.name, "prometheus: {note}"),
                }
            }
            by_name.insert(m.name.clone(), Arc::new(module));
        }
        // Without modules: jmx_exporter's no-rules default export.
        if !by_name.contains_key(DEFAULT_MODULE) && self.modules.is_empty() {
            let module = Module::from_yaml(DEFAULT_MODULE, "{}").expect("the empty configuration");
            by_name.insert(
                DEFAULT_MODULE.to_string(),
                Arc::new(Rules::JmxExporter(module)),
            );
        }
        Ok(Modules { by_name })
    }
}

impl PrometheusConfig {
    /// Each module's name with its rules file's `openTelemetry:` block
    /// (`None` also for a file that doesn't compile: `problems` names it).
    pub fn open_telemetry_blocks(
        &self,
    ) -> std::collections::BTreeMap<
        String,
        Option<crate::exporter::open_telemetry::OpenTelemetryBlock>,
    > {
        let mut blocks: std::collections::BTreeMap<_, _> = self
            .modules
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let block = compile(i, m)
                    .ok()
                    .and_then(|m| m.open_telemetry_block().cloned());
                (m.name.clone(), block)
            })
            .collect();
        if self.modules.is_empty() {
            blocks.insert(DEFAULT_MODULE.to_string(), None);
        }
        blocks
    }
}

/// One module's rules, read and compiled; each error names the module,
/// the file and what is wrong in it.
fn compile(index: usize, m: &ModuleConfig) -> Result<Rules, Vec<String>> {
    let key = format!("prometheus.modules[{index}] ({})", m.name);
    match (&m.rules_file, m.otel_rules.is_empty()) {
        (Some(file), true) => {
            let at = format!("{key}: rules_file {}", file.display());
            let text = std::fs::read_to_string(file).map_err(|e| vec![format!("{at}: {e}")])?;
            let module = Module::from_yaml(&m.name, &text).map_err(|e| vec![format!("{at}: {e}")])?;
            if !m.otel_included.is_empty() || !m.otel_excluded.is_empty() {
                return Err(vec![format!(
                    "{key}: otel_included and otel_excluded choose among OpenTelemetry rules (otel_rules), not a jmx_exporter rules_file"
                )]);
            }
            Ok(Rules::JmxExporter(module))
        }
        (None, false) => {
            let (mut files, mut problems) = (Vec::new(), Vec::new());
            for text in otel_texts(&m.otel_rules) {
                match text {
                    Ok(file) => files.push(file),
                    Err(why) => problems.push(why),
                }
            }
            match otel::Module::from_files(&m.name, &files, &m.otel_included, &m.otel_excluded) {
                Ok(module) if problems.is_empty() => Ok(Rules::OpenTelemetry(module)),
                Ok(_) => Err(problems),
                Err(mut more) => {
                    problems.append(&mut more);
                    Err(problems)
                }
            }
            .map_err(|problems| problems.into_iter().map(|p| format!("{key}: {p}")).collect())
        }
        (Some(_), false) => Err(vec![format!(
            "{key}: give rules_file (jmx_exporter's rules) or otel_rules (OpenTelemetry's), not both: a module has one dialect"
        )]),
        (None, true) => Err(vec![format!(
            "{key}: needs rules_file = \"<jmx_exporter rules .yml>\" or otel_rules = [\"jvm\", …] (OpenTelemetry's JMX rules)"
        )]),
    }
}

/// Each `otel_rules` entry's text, with the name messages give it: a
/// built-in system's file, or the file at a path.
fn otel_texts(entries: &[String]) -> Vec<Result<(String, String), String>> {
    entries
        .iter()
        .map(|entry| {
            if let Some(text) = otel::built_in(entry) {
                return Ok((format!("built-in {entry}"), text.to_string()));
            }
            if let Some(why) = otel::not_a_system(entry) {
                return Err(why);
            }
            std::fs::read_to_string(entry)
                .map(|text| (entry.clone(), text))
                .map_err(|e| format!("otel_rules: {entry}: {e}"))
        })
        .collect()
}

/// The compiled modules of a configuration.
#[derive(Debug, Default)]
pub struct Modules {
    by_name: HashMap<String, Arc<Rules>>,
}

impl Modules {
    pub fn get(&self, name: &str) -> Option<&Arc<Rules>> {
        self.by_name.get(name)
    }

    /// The names, sorted, for messages.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}
