//! `[mcp]`: the MCP endpoint's own section of the configuration (a leaf:
//! `config` composes it without importing the door).

use serde::Deserialize;

/// `[mcp]`: the MCP endpoint on every listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Serve MCP at all.
    pub enabled: bool,
    /// Where, on the gateway's listeners.
    pub path: String,
    /// Largest structured result a tool returns; more is cut with a note.
    pub max_result_bytes: usize,
    /// Browser origins (`https://console.example.com`) that may call the
    /// endpoint, besides those the caller's own `<cors>` names and the
    /// gateway's own loopback origin. A request with any other `Origin`
    /// is refused (DNS rebinding).
    pub allowed_origins: Vec<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            enabled: true,
            path: "/mcp".into(),
            max_result_bytes: 64 * 1024,
            allowed_origins: Vec::new(),
        }
    }
}

impl McpConfig {
    /// Every problem with the section, each naming its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.path.starts_with('/') || self.path.len() < 2 {
            problems.push(format!(
                "mcp.path: {:?} must be a path below the root, like \"/mcp\"",
                self.path
            ));
        }
        if self.max_result_bytes < 1024 {
            problems.push(format!(
                "mcp.max_result_bytes: {} is too small for any answer; use 1024 or more",
                self.max_result_bytes
            ));
        }
        for origin in &self.allowed_origins {
            let parsed = url::Url::parse(origin).ok();
            let bare = parsed.as_ref().is_some_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.path() == "/"
                    && u.query().is_none()
            });
            if !bare {
                problems.push(format!(
                    "mcp.allowed_origins: {origin:?} is not an origin; write it as \
                     scheme://host[:port], like \"https://console.example.com\""
                ));
            }
        }
        problems
    }
}
