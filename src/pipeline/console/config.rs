//! `[console]`: where the fleet console is served (a leaf: `config`
//! composes it without importing the door).

use serde::Deserialize;

/// `[console]`: HTML pages for people, on the Jolokia listeners.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    pub enabled: bool,
    /// Where, on the gateway's listeners; the pages are below it.
    pub path: String,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            enabled: true,
            path: "/console".into(),
        }
    }
}

impl ConsoleConfig {
    /// Every problem, named by its key.
    pub fn problems(&self) -> Vec<String> {
        let p = &self.path;
        if !p.starts_with('/') || p.len() < 2 || p.ends_with('/') || p.contains(['?', '#']) {
            vec![format!(
                "console.path: \"{p}\" is not a path like \"/console\" (a leading /, no trailing /)"
            )]
        } else {
            Vec::new()
        }
    }

    /// Whether a request path is the console's: its path, or below it.
    pub fn serves(&self, path: &str) -> bool {
        self.enabled
            && path
                .strip_prefix(self.path.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_and_what_is_below_it() {
        let c = ConsoleConfig::default();
        assert!(c.serves("/console") && c.serves("/console/") && c.serves("/console/x"));
        assert!(!c.serves("/consolex") && !c.serves("/jolokia"));
        assert!(c.problems().is_empty());
        for bad in ["console", "/", "/console/", "/c?x"] {
            let c = ConsoleConfig {
                path: bad.into(),
                ..ConsoleConfig::default()
            };
            assert!(c.problems()[0].contains("console.path"), "{bad}");
        }
        let off = ConsoleConfig {
            enabled: false,
            ..ConsoleConfig::default()
        };
        assert!(!off.serves("/console"));
    }
}
