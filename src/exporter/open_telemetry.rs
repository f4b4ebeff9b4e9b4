//! A rules file's own `openTelemetry:` block, as jmx_exporter 1.x reads
//! it: where and how its metrics are pushed. The gateway's OTLP exports
//! take from it what their `[[otlp.exports]]` entry leaves unset.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// `openTelemetry:`; every key optional, as in jmx_exporter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenTelemetryBlock {
    pub endpoint: Option<String>,
    pub protocol: Option<String>,
    /// Seconds between pushes.
    pub interval: Option<u64>,
    pub timeout_seconds: Option<u64>,
    /// Values kept as secrets: they may carry tokens.
    #[serde(default)]
    pub headers: BTreeMap<String, crate::secret::Secret>,
    #[serde(default)]
    pub resource_attributes: BTreeMap<String, String>,
    /// One JVM's id in jmx_exporter; each target is its own instance here
    /// (its name), so it is read and not used.
    pub service_instance_id: Option<String>,
    pub service_namespace: Option<String>,
    pub service_name: Option<String>,
    pub service_version: Option<String>,
}

impl OpenTelemetryBlock {
    /// Reads the block; errors name the key at fault.
    pub fn from_value(value: &Value) -> Result<Option<OpenTelemetryBlock>, String> {
        if value.is_null() {
            return Ok(None);
        }
        let block: OpenTelemetryBlock =
            serde_json::from_value(value.clone()).map_err(|e| format!("`openTelemetry`: {e}"))?;
        for (key, seconds) in [
            ("interval", block.interval),
            ("timeoutSeconds", block.timeout_seconds),
        ] {
            if seconds == Some(0) {
                return Err(format!("`openTelemetry.{key}` must be greater than zero"));
            }
        }
        for (key, text) in [
            ("serviceInstanceId", &block.service_instance_id),
            ("serviceNamespace", &block.service_namespace),
            ("serviceName", &block.service_name),
            ("serviceVersion", &block.service_version),
        ] {
            if text.as_ref().is_some_and(|t| t.trim().is_empty()) {
                return Err(format!("`openTelemetry.{key}` must not be blank"));
            }
        }
        Ok(Some(block))
    }

    /// The attributes every resource of the module carries:
    /// `resourceAttributes`, then `service.namespace` and `service.version`
    /// when set.
    pub fn resource_attributes(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .resource_attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, value) in [
            ("service.namespace", &self.service_namespace),
            ("service.version", &self.service_version),
        ] {
            if let Some(v) = value {
                out.retain(|(k, _)| k != key);
                out.push((key.to_string(), v.clone()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(yaml: &str) -> Result<Option<OpenTelemetryBlock>, String> {
        let root: Value = serde_saphyr::from_str(yaml).unwrap();
        OpenTelemetryBlock::from_value(&root["openTelemetry"])
    }

    #[test]
    fn jmx_exporters_documented_block_reads() {
        let b = block(
            "openTelemetry:\n  endpoint: http://localhost:4318\n  protocol: http/protobuf\n  \
             interval: 15\n  timeoutSeconds: 10\n  headers:\n    Authorization: Bearer t\n  \
             resourceAttributes:\n    deployment.environment: prod\n  serviceName: orders\n  \
             serviceNamespace: shop\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(b.endpoint.as_deref(), Some("http://localhost:4318"));
        assert_eq!(b.interval, Some(15));
        assert_eq!(b.headers["Authorization"].expose(), "Bearer t");
        assert!(!format!("{b:?}").contains("Bearer t"));
        assert_eq!(b.service_name.as_deref(), Some("orders"));
        assert_eq!(
            b.resource_attributes(),
            [
                ("deployment.environment".to_string(), "prod".to_string()),
                ("service.namespace".to_string(), "shop".to_string())
            ]
        );
        assert_eq!(block("rules: []\n").unwrap(), None);
    }

    #[test]
    fn bad_values_name_their_key() {
        for (yaml, key) in [
            ("openTelemetry:\n  interval: 0\n", "interval"),
            ("openTelemetry:\n  timeoutSeconds: 0\n", "timeoutSeconds"),
            ("openTelemetry:\n  serviceName: ' '\n", "serviceName"),
            ("openTelemetry:\n  interval: soon\n", "openTelemetry"),
            ("openTelemetry:\n  endpiont: x\n", "endpiont"),
        ] {
            let e = block(yaml).unwrap_err();
            assert!(e.contains(key), "{yaml}: {e}");
        }
    }
}
