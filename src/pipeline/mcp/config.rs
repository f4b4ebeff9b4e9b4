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
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            enabled: true,
            path: "/mcp".into(),
            max_result_bytes: 64 * 1024,
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
        problems
    }
}
