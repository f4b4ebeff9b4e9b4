//! `[events]`: the webhooks told of the fleet's journal (a leaf: `config`
//! composes it without importing the door).

use serde::Deserialize;

use crate::access::TargetSelector;
use crate::events::Kind;
use crate::notify::NotifyFormat;
use crate::secret::Secret;

/// `[events]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsConfig {
    pub webhooks: Vec<WebhookConfig>,
}

/// `[[events.webhooks]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Where notices are posted; a secret (such URLs hold tokens).
    pub url: Secret,
    /// The event kinds told (`target_down`, …); empty: all of them.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Only events about these targets (a name, glob or label selector).
    #[serde(default)]
    pub targets: Option<String>,
    #[serde(default)]
    pub format: NotifyFormat,
}

/// Every kind a hook may name.
const KINDS: [Kind; 13] = [
    Kind::TargetDown,
    Kind::TargetUp,
    Kind::BreakerOpened,
    Kind::BreakerClosed,
    Kind::TargetsDiscovered,
    Kind::TargetsRemoved,
    Kind::ConfigReloaded,
    Kind::ConfigReloadFailed,
    Kind::AccessRequested,
    Kind::AccessGranted,
    Kind::AccessDenied,
    Kind::AccessRevoked,
    Kind::AccessExpired,
];

impl EventsConfig {
    /// Every problem, named by its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (i, hook) in self.webhooks.iter().enumerate() {
            let key = format!("events.webhooks[{i}]");
            // Not echoed: such a URL often holds a token.
            let ok = url::Url::parse(hook.url.expose())
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !ok {
                problems.push(format!("{key}.url: not an http:// or https:// URL"));
            }
            for kind in &hook.kinds {
                if !KINDS.iter().any(|k| k.as_str() == kind) {
                    let known: Vec<&str> = KINDS.iter().map(|k| k.as_str()).collect();
                    problems.push(format!(
                        "{key}.kinds: no event kind \"{kind}\"; the kinds are {}",
                        known.join(", ")
                    ));
                }
            }
            if let Some(t) = &hook.targets {
                if let Err(e) = TargetSelector::parse(t) {
                    problems.push(format!("{key}.targets: {e}"));
                }
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_hooks_are_named_and_their_urls_not_echoed() {
        let config: EventsConfig = toml::from_str(
            "[[webhooks]]\nurl = \"not a url SECRET\"\nkinds = [\"target_gone\"]\ntargets = \"env=\"\n",
        )
        .unwrap();
        let problems = config.problems().join("\n");
        assert!(problems.contains("events.webhooks[0].url"), "{problems}");
        assert!(
            problems.contains("no event kind \"target_gone\""),
            "{problems}"
        );
        assert!(
            problems.contains("events.webhooks[0].targets"),
            "{problems}"
        );
        assert!(!problems.contains("SECRET"), "{problems}");
    }
}
