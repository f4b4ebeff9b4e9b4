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
    /// Roles whose holders read everyone's audit records on the audit
    /// page and verify the chain; everyone else reads their own.
    pub auditors: Vec<String>,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            enabled: true,
            path: "/console".into(),
            auditors: Vec::new(),
        }
    }
}

impl ConsoleConfig {
    /// Every problem, named by its key; `roles` are the configured
    /// role names.
    pub fn problems(&self, roles: &[String]) -> Vec<String> {
        let mut problems = Vec::new();
        let p = &self.path;
        if !p.starts_with('/') || p.len() < 2 || p.ends_with('/') || p.contains(['?', '#']) {
            problems.push(format!(
                "console.path: \"{p}\" is not a path like \"/console\" (a leading /, no trailing /)"
            ));
        }
        for role in self.auditors.iter().filter(|r| !roles.contains(r)) {
            problems.push(format!("console.auditors: no role is named \"{role}\""));
        }
        problems
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
        assert!(c.problems(&[]).is_empty());
        for bad in ["console", "/", "/console/", "/c?x"] {
            let c = ConsoleConfig {
                path: bad.into(),
                ..ConsoleConfig::default()
            };
            assert!(c.problems(&[])[0].contains("console.path"), "{bad}");
        }
        let c = ConsoleConfig {
            auditors: vec!["security".into(), "nobody".into()],
            ..ConsoleConfig::default()
        };
        assert_eq!(
            c.problems(&["security".into()]),
            ["console.auditors: no role is named \"nobody\""]
        );
        let off = ConsoleConfig {
            enabled: false,
            ..ConsoleConfig::default()
        };
        assert!(!off.serves("/console"));
    }
}
