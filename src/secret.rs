//! Secrets (target passwords, client-supplied credentials): a leaf type
//! that every layer may hold without importing the configuration.

use std::fmt;

use serde::Deserialize;

/// A string that never shows itself in `Debug` or `Display` output, so a
/// config dump or an error can't leak it.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A file's first line (a secret file as operators write one, with or
    /// without its newline); `Err` names the file, never its content.
    pub fn first_line_of(path: &std::path::Path) -> Result<Secret, String> {
        std::fs::read_to_string(path)
            .map(|t| Secret(t.lines().next().unwrap_or_default().to_string()))
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}
