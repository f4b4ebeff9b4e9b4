//! The gateway's own identity and its answer to `version` without a target.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::protocol::PROTOCOL_VERSION;

pub const GATEWAY_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone)]
pub struct GatewayIdentity {
    /// Unique per process start; prefixes request ids.
    pub boot_id: u64,
    pub id: String,
    public_url: Option<String>,
}

/// The request limits a `version` answer reports, as in force now (they
/// change on reload; the identity doesn't).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_bulk_items: usize,
}

impl GatewayIdentity {
    /// `server.public_url`, when configured.
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    /// `public_url` is `server.public_url`, the URL a `version` answer shows.
    pub fn new(public_url: Option<String>) -> GatewayIdentity {
        let boot_id = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default()
            ^ u64::from(std::process::id()) << 32;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        GatewayIdentity {
            boot_id,
            id: format!("{host}-{}-jmxgate", std::process::id()),
            public_url,
        }
    }

    /// The `value` of a `config` answer (protocol 8.1): identity, protocol
    /// and the authentication of the listener asked.
    ///
    /// `fleet` is the number of targets when the caller's roles reach
    /// some: only then are the host, the process id and the fleet's size
    /// shown.
    pub fn config_value(&self, authentication: Vec<Value>, fleet: Option<usize>) -> Value {
        json!({
            "agent": GATEWAY_VERSION,
            "protocol": PROTOCOL_VERSION,
            "security": {"authentication": authentication},
            "id": self.shown_id(fleet),
        })
    }

    /// The agent id (host and process id) to callers who reach the fleet;
    /// to others only that this is jmxgate.
    fn shown_id(&self, fleet: Option<usize>) -> &str {
        if fleet.is_some() {
            &self.id
        } else {
            "jmxgate"
        }
    }

    /// The `value` of a `version` answer, in the protocol 8 shape. `host` is
    /// the request's Host header, used for `details.url` when no
    /// `server.public_url` is configured.
    pub fn version_value(
        &self,
        host: Option<&str>,
        prefix: &str,
        tls: bool,
        secured: bool,
        fleet: Option<usize>,
        limits: Limits,
    ) -> Value {
        let scheme = if tls { "https" } else { "http" };
        let url = self.public_url.clone().or_else(|| {
            host.filter(|h| {
                h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
            })
            .map(|h| format!("{scheme}://{h}{prefix}"))
        });
        let mut details = json!({
            "agent_version": GATEWAY_VERSION,
            "agent_id": self.shown_id(fleet),
            "agent_description": "jmxgate: Jolokia gateway for a fleet of agents",
            "server_vendor": "jmxgate",
            "server_product": "jmxgate",
            "server_version": GATEWAY_VERSION,
            "secured": secured,
        });
        if let Some(url) = url {
            details["url"] = Value::String(url);
        }
        let mut info = json!({ "proxy": {} });
        if let Some(targets) = fleet {
            info["jmxgate"] = json!({ "targets": targets });
        }
        json!({
            "agent": GATEWAY_VERSION,
            "protocol": PROTOCOL_VERSION,
            "id": self.shown_id(fleet),
            "details": details,
            "config": {
                "maxBodyBytes": limits.max_body_bytes.to_string(),
                "maxBulkItems": limits.max_bulk_items.to_string(),
            },
            "info": info
        })
    }
}
