//! `completion/complete` for the prompts' arguments: target names (and
//! label selectors), MBean names and attribute names, from what the caller
//! may see. The candidates come from the gateway (`mod.rs`: the fleet as
//! the caller reaches it, a `search` and a `list` run as the caller); this
//! module picks which ones the typed value completes to. Pure.

use std::collections::BTreeSet;

use rmcp::model::CompletionInfo;

use super::prompts::PromptName;

/// What a prompt argument completes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// Targets the caller reaches; `groups` adds label selectors and `*`.
    Target { groups: bool },
    /// MBean names on `target`.
    Mbean { target: String },
    /// Readable attributes of `mbean` on `target`.
    Attribute { target: String, mbean: String },
    /// Nothing to offer (a number, a time): an empty answer, not an error.
    Nothing,
}

/// Why an argument can't be completed: an invalid-params error.
#[derive(Debug, Clone, PartialEq)]
pub struct NotCompletable(pub String);

/// What `argument` of `prompt` completes to; `context` gives the values of
/// the prompt's other arguments already chosen (`target` for MBeans;
/// `target` and `mbean` for attributes). Without them there is nothing to
/// complete yet.
pub fn wanted(
    prompt: &str,
    argument: &str,
    context: &dyn Fn(&str) -> Option<String>,
) -> Result<Wanted, NotCompletable> {
    let Some(p) = PromptName::parse(prompt) else {
        return Err(NotCompletable(format!(
            "no prompt {:?}; prompts/list shows them",
            cut(prompt)
        )));
    };
    if !p.takes(argument) {
        return Err(NotCompletable(format!(
            "prompt {} has no argument {:?}",
            p.as_str(),
            cut(argument)
        )));
    }
    let chosen = |key: &str| context(key).filter(|v| !v.trim().is_empty());
    Ok(match argument {
        "target" => Wanted::Target {
            groups: !p.one_target(),
        },
        "mbean" => match chosen("target") {
            Some(target) => Wanted::Mbean { target },
            None => Wanted::Nothing,
        },
        "attribute" => match (chosen("target"), chosen("mbean")) {
            (Some(target), Some(mbean)) => Wanted::Attribute { target, mbean },
            _ => Wanted::Nothing,
        },
        _ => Wanted::Nothing,
    })
}

/// What `argument` of a resource template (`resources.rs`) completes to:
/// `target` to the targets the caller reaches, `mbean` to the MBeans on
/// the `target` already chosen.
pub fn wanted_in_template(
    template: &str,
    argument: &str,
    context: &dyn Fn(&str) -> Option<String>,
) -> Result<Wanted, NotCompletable> {
    use super::resources::{is_template, MBEAN_TEMPLATE};
    if !is_template(template) {
        return Err(NotCompletable(format!(
            "no resource template {:?}; resources/templates/list shows them",
            cut(template)
        )));
    }
    Ok(match argument {
        "target" => Wanted::Target { groups: false },
        "mbean" if template == MBEAN_TEMPLATE => {
            match context("target").filter(|v| !v.trim().is_empty()) {
                Some(target) => Wanted::Mbean { target },
                None => Wanted::Nothing,
            }
        }
        _ => {
            return Err(NotCompletable(format!(
                "resource template {template} has no argument {:?}",
                cut(argument)
            )))
        }
    })
}

/// The `search` pattern that finds the MBeans `typed` may complete to:
/// its domain's MBeans once a domain is typed whole (no wildcards), else
/// every MBean.
pub fn search_pattern(typed: &str) -> String {
    match typed.split_once(':') {
        Some((domain, _)) if !domain.is_empty() && !domain.contains(['*', '?']) => {
            format!("{domain}:*")
        }
        _ => "*:*".to_string(),
    }
}

/// The candidates `typed` completes to, best first: those starting with
/// it, then those containing it (case-insensitively both: "heap" finds
/// `HeapMemoryUsage`), each group sorted; at most
/// `CompletionInfo::MAX_VALUES`, with the total and whether more matched.
pub fn complete<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> CompletionInfo {
    let typed_lower = typed.to_lowercase();
    let mut starting = BTreeSet::new();
    let mut containing = BTreeSet::new();
    for c in candidates {
        let lower = c.to_lowercase();
        if lower.starts_with(&typed_lower) {
            starting.insert(c);
        } else if lower.contains(&typed_lower) {
            containing.insert(c);
        }
    }
    let total = starting.len() + containing.len();
    let values: Vec<String> = starting
        .into_iter()
        .chain(containing)
        .take(CompletionInfo::MAX_VALUES)
        .map(str::to_string)
        .collect();
    let has_more = total > values.len();
    CompletionInfo::with_pagination(
        values,
        Some(u32::try_from(total).unwrap_or(u32::MAX)),
        has_more,
    )
    .expect("at most MAX_VALUES values")
}

fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_template_completes_its_target_then_its_mbean() {
        use crate::doors::mcp::resources::{MBEAN_TEMPLATE, TARGET_TEMPLATE};
        let none = |_: &str| None;
        let chosen = |k: &str| (k == "target").then(|| "a".to_string());
        assert_eq!(
            wanted_in_template(TARGET_TEMPLATE, "target", &none),
            Ok(Wanted::Target { groups: false })
        );
        assert_eq!(
            wanted_in_template(MBEAN_TEMPLATE, "mbean", &none),
            Ok(Wanted::Nothing)
        );
        assert_eq!(
            wanted_in_template(MBEAN_TEMPLATE, "mbean", &chosen),
            Ok(Wanted::Mbean { target: "a".into() })
        );
        assert!(wanted_in_template(TARGET_TEMPLATE, "mbean", &chosen).is_err());
        assert!(wanted_in_template("test://template/{id}/data", "id", &none).is_err());
    }

    #[test]
    fn each_argument_completes_from_what_is_chosen() {
        let none = |_: &str| None;
        let chosen = |k: &str| match k {
            "target" => Some("orders-1".to_string()),
            "mbean" => Some("java.lang:type=Memory".to_string()),
            _ => None,
        };
        assert_eq!(
            wanted("highest_heap", "target", &none),
            Ok(Wanted::Target { groups: true })
        );
        assert_eq!(
            wanted("inspect_attribute", "target", &none),
            Ok(Wanted::Target { groups: false })
        );
        assert_eq!(
            wanted("inspect_attribute", "mbean", &none),
            Ok(Wanted::Nothing)
        );
        assert_eq!(
            wanted("inspect_attribute", "mbean", &chosen),
            Ok(Wanted::Mbean {
                target: "orders-1".into()
            })
        );
        assert_eq!(
            wanted("inspect_attribute", "attribute", &chosen),
            Ok(Wanted::Attribute {
                target: "orders-1".into(),
                mbean: "java.lang:type=Memory".into()
            })
        );
        assert_eq!(wanted("highest_heap", "n", &none), Ok(Wanted::Nothing));
        assert!(wanted("nope", "target", &none)
            .unwrap_err()
            .0
            .contains("no prompt"));
        assert!(wanted("highest_heap", "mbean", &none)
            .unwrap_err()
            .0
            .contains("has no argument"));
    }

    #[test]
    fn prefixes_first_then_substrings_bounded() {
        let got = complete(
            "heap",
            [
                "NonHeapMemoryUsage",
                "HeapMemoryUsage",
                "Verbose",
                "heapDump",
            ],
        );
        assert_eq!(
            got.values,
            ["HeapMemoryUsage", "heapDump", "NonHeapMemoryUsage"]
        );
        assert_eq!((got.total, got.has_more), (Some(3), Some(false)));
        let many: Vec<String> = (0..250).map(|i| format!("t-{i:03}")).collect();
        let got = complete("t-", many.iter().map(String::as_str));
        assert_eq!(got.values.len(), CompletionInfo::MAX_VALUES);
        assert_eq!((got.total, got.has_more), (Some(250), Some(true)));
        assert_eq!(complete("", ["b", "a"]).values, ["a", "b"]);
    }

    #[test]
    fn the_search_pattern_narrows_to_a_typed_domain() {
        assert_eq!(search_pattern("java.lang:type=Mem"), "java.lang:*");
        assert_eq!(search_pattern("java.la"), "*:*");
        assert_eq!(search_pattern("java.*:type"), "*:*");
        assert_eq!(search_pattern(""), "*:*");
    }
}
