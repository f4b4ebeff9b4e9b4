//! MCP resources: each target the caller may see, and each MBean on it,
//! under one URI scheme (`jmxgate://targets/{target}` and
//! `jmxgate://targets/{target}/mbeans/{mbean}`, names percent-encoded).
//! A list names the targets (paged, by name); the templates name both
//! shapes; a read of either is the tool call it stands for (`mod.rs`:
//! `search_mbeans` for a target, `describe_mbean` for an MBean), judged
//! and audited as that call. A `subscriptions/listen` (protocol
//! 2026-07-28) hears of a watched resource when its target's state,
//! agent or labels change, and of the list when the caller's targets do.
//! This module holds the URIs, the paging and what counts as a change.
//! Pure.

use base64::Engine as _;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rmcp::model::ResourceTemplate;

/// What a name may keep unescaped in a URI: RFC 3986's unreserved
/// characters. Everything else (`:`, `,`, `=`, `/`, `*` of MBean names)
/// is percent-encoded, so a `/` always separates the URI's parts.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

const TARGETS: &str = "jmxgate://targets/";
const MBEANS: &str = "/mbeans/";

pub const TARGET_TEMPLATE: &str = "jmxgate://targets/{target}";
pub const MBEAN_TEMPLATE: &str = "jmxgate://targets/{target}/mbeans/{mbean}";

/// Targets in one page of `resources/list`.
pub const PAGE: usize = 100;

/// A resource URI, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Target(String),
    Mbean { target: String, mbean: String },
}

pub fn target_uri(target: &str) -> String {
    format!("{TARGETS}{}", utf8_percent_encode(target, ESCAPED))
}

pub fn mbean_uri(target: &str, mbean: &str) -> String {
    format!(
        "{}{MBEANS}{}",
        target_uri(target),
        utf8_percent_encode(mbean, ESCAPED)
    )
}

/// Why a URI names no resource of the gateway's: the error's text.
#[derive(Debug, Clone, PartialEq)]
pub struct NotOurs(pub String);

fn decoded(part: &str, what: &str, uri: &str) -> Result<String, NotOurs> {
    let bad = |why: &str| {
        NotOurs(format!(
            "{}: {why}; resources/templates/list shows the shapes: \
             {TARGET_TEMPLATE} and {MBEAN_TEMPLATE}",
            cut(uri)
        ))
    };
    let text = percent_decode_str(part)
        .decode_utf8()
        .map_err(|_| bad(&format!("the {what} is not UTF-8")))?;
    if text.is_empty() || part.contains('/') {
        return Err(bad(&format!("no {what} in it")));
    }
    Ok(text.into_owned())
}

/// The resource `uri` names, or why it names none.
pub fn parse(uri: &str) -> Result<Resource, NotOurs> {
    let Some(rest) = uri.strip_prefix(TARGETS) else {
        return Err(NotOurs(format!(
            "{}: not a jmxgate resource; resources/list shows the targets you may see, \
             under {TARGET_TEMPLATE}",
            cut(uri)
        )));
    };
    match rest.split_once(MBEANS) {
        None => Ok(Resource::Target(decoded(rest, "target", uri)?)),
        Some((target, mbean)) => Ok(Resource::Mbean {
            target: decoded(target, "target", uri)?,
            mbean: decoded(mbean, "MBean", uri)?,
        }),
    }
}

/// The two shapes, for `resources/templates/list`.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(TARGET_TEMPLATE, "target")
            .with_title("A target")
            .with_description(
                "A JVM you may see: its labels and the MBeans your policies let you see \
                 (as search_mbeans), each with its resource URI.",
            )
            .with_mime_type("application/json"),
        ResourceTemplate::new(MBEAN_TEMPLATE, "mbean")
            .with_title("An MBean on a target")
            .with_description(
                "Its attributes and operations with their types and what you may read, write \
                 and execute (as describe_mbean). The MBean name is percent-encoded.",
            )
            .with_mime_type("application/json"),
    ]
}

/// Whether `uri` is one of [`templates`] (for completion).
pub fn is_template(uri: &str) -> bool {
    uri == TARGET_TEMPLATE || uri == MBEAN_TEMPLATE
}

/// One page of `names` (sorted) after `cursor`, and the cursor of the
/// next page when more follow. A cursor holds the last name shown, so a
/// target added or gone between pages moves no other across a page.
pub fn page<'a>(
    names: &[&'a str],
    cursor: Option<&str>,
) -> Result<(Vec<&'a str>, Option<String>), NotOurs> {
    let after = match cursor {
        None => None,
        Some(c) => Some(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(c)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| {
                    NotOurs(format!(
                        "cursor {:?} is not one resources/list gave",
                        cut(c)
                    ))
                })?,
        ),
    };
    let start = after.map_or(0, |a| names.partition_point(|n| *n <= a.as_str()));
    let shown: Vec<&str> = names.iter().skip(start).take(PAGE).copied().collect();
    let next = (start + shown.len() < names.len())
        .then(|| shown.last())
        .flatten()
        .map(|last| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last));
    Ok((shown, next))
}

/// Most resources one `subscriptions/listen` watches; past it, the rest
/// are not accepted (the acknowledgment says which are).
pub const MAX_WATCHED: usize = 100;

/// The URIs of `requested` a subscription accepts: the gateway's own
/// (whether the caller may see them is decided as it listens, so a
/// hidden target reads as one that never changes), at most
/// [`MAX_WATCHED`].
pub fn watchable(requested: &[String]) -> Vec<String> {
    requested
        .iter()
        .filter(|uri| parse(uri).is_ok())
        .take(MAX_WATCHED)
        .cloned()
        .collect()
}

/// The URIs whose resource changed between two looks: `before` and
/// `now` hold, per URI, what its content depends on (`None`: not there
/// for the caller).
pub fn changed<'a, T: PartialEq>(
    uris: &'a [String],
    before: &[Option<T>],
    now: &[Option<T>],
) -> Vec<&'a str> {
    uris.iter()
        .zip(before.iter().zip(now))
        .filter(|(_, (b, n))| b != n)
        .map(|(uri, _)| uri.as_str())
        .collect()
}

fn cut(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_go_through_their_uri_unchanged() {
        for (target, mbean) in [
            ("shop-1", "java.lang:type=Memory"),
            ("a/b c", "d:name=\"x/y\",type=T,*"),
            ("zürich", "ü:k=v"),
        ] {
            assert_eq!(
                parse(&target_uri(target)),
                Ok(Resource::Target(target.into()))
            );
            let uri = mbean_uri(target, mbean);
            assert_eq!(uri.matches('/').count(), 5, "{uri}");
            assert_eq!(
                parse(&uri),
                Ok(Resource::Mbean {
                    target: target.into(),
                    mbean: mbean.into()
                })
            );
        }
        assert_eq!(
            mbean_uri("a", "java.lang:type=Memory"),
            "jmxgate://targets/a/mbeans/java.lang%3Atype%3DMemory"
        );
    }

    #[test]
    fn a_uri_that_is_not_ours_says_what_is() {
        for bad in [
            "test://static-text",
            "jmxgate://targets/",
            "jmxgate://targets/a/b",
            "jmxgate://targets/a/mbeans/",
            "jmxgate://targets/a/mbeans/x/y",
            "jmxgate://targets/%FF",
        ] {
            let Err(NotOurs(text)) = parse(bad) else {
                panic!("{bad} parsed");
            };
            assert!(text.starts_with(bad), "{text}");
            assert!(text.contains("jmxgate://targets/{target}"), "{text}");
        }
    }

    #[test]
    fn a_subscription_watches_its_own_uris_and_tells_what_changed() {
        let asked: Vec<String> = [
            "jmxgate://targets/a",
            "test://watched-resource",
            "jmxgate://targets/b/mbeans/d%3Ak%3Dv",
        ]
        .map(String::from)
        .to_vec();
        let watched = watchable(&asked);
        assert_eq!(
            watched,
            [
                "jmxgate://targets/a",
                "jmxgate://targets/b/mbeans/d%3Ak%3Dv"
            ]
        );
        let many: Vec<String> = (0..500).map(|i| target_uri(&format!("t{i}"))).collect();
        assert_eq!(watchable(&many).len(), MAX_WATCHED);
        let before = [Some(("up", "1.7.1")), None];
        assert_eq!(
            changed(&watched, &before, &[Some(("down", "1.7.1")), None]),
            ["jmxgate://targets/a"]
        );
        assert_eq!(changed(&watched, &before, &before), Vec::<&str>::new());
        assert_eq!(
            changed(
                &watched,
                &before,
                &[Some(("up", "1.7.1")), Some(("up", "2.6.0"))]
            ),
            ["jmxgate://targets/b/mbeans/d%3Ak%3Dv"]
        );
    }

    #[test]
    fn pages_follow_each_other_by_name() {
        let names: Vec<String> = (0..250).map(|i| format!("t{i:03}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (first, next) = page(&names, None).unwrap();
        assert_eq!((first.len(), first[0]), (PAGE, "t000"));
        let (second, next) = page(&names, next.as_deref()).unwrap();
        assert_eq!(second[0], "t100");
        let (third, next) = page(&names, next.as_deref()).unwrap();
        assert_eq!((third.len(), third[49], next), (50, "t249", None));
        // A target gone between pages moves none across.
        let (_, next) = page(&names, None).unwrap();
        let fewer: Vec<&str> = names.iter().copied().filter(|n| *n != "t050").collect();
        assert_eq!(page(&fewer, next.as_deref()).unwrap().0[0], "t100");
        assert!(page(&names, Some("!!")).is_err());
        assert_eq!(page(&[], None).unwrap(), (vec![], None));
    }
}
