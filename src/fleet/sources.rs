//! Where the fleet's targets come from, and the one place they are folded
//! together. Every source (the configuration's `[[targets]]`, each
//! `[[inventory]]` file, each `[[discovery.dns]]` and
//! `[[discovery.kubernetes]]` entry, a source fed through
//! `Gateway::discovered_by`) is a stream of [`SourceEvent`]s, shaped like
//! kube-runtime's watcher events: a whole listing ([`Change::Restart`], its
//! `Init`..`InitDone`), targets applied or deleted ([`Change::Apply`]), and
//! whether the source's last listing succeeded ([`Change::Up`]).
//!
//! A [`SourceBook`] keeps each source's listing and settles a name two
//! sources give by one rule: the source first in [`SourceName`]'s order
//! keeps it (configured targets, then inventory files in the order listed,
//! then DNS entries, then Kubernetes entries, each in configuration order,
//! then other sources by name). The book is pure: it says what changes in
//! the fleet ([`Plan::fleet`]), and the gateway builds only that.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use indexmap::IndexMap;
use smallvec::SmallVec;

use super::FleetChange;
use crate::agent_settings::{Origin, TargetConfig};

/// One source of targets, ordered by the collision rule: of two sources
/// listing one name, the smaller keeps it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceName {
    /// The configuration's `[[targets]]` (`config`).
    Config,
    /// One `[[inventory]]` file (`inventory:<targets_file>`), by its place
    /// in the configuration.
    Inventory { position: usize, file: Arc<str> },
    /// One `[[discovery.dns]]` entry (`dns[0]`), by its place.
    Dns(usize),
    /// One `[[discovery.kubernetes]]` entry (`kubernetes[0]`), by its place.
    Kubernetes(usize),
    /// A source fed through the gateway's API under a name of its own.
    Other(Arc<str>),
}

impl SourceName {
    /// The source a name given through the API means: `dns[N]` and
    /// `kubernetes[N]` are those entries, other names sources of their
    /// own; the configuration's and the inventories' names are taken.
    pub fn named(name: &str) -> Result<SourceName, String> {
        let index = |prefix: &str| {
            name.strip_prefix(prefix)?
                .strip_suffix(']')?
                .parse::<usize>()
                .ok()
        };
        if let Some(i) = index("dns[") {
            Ok(SourceName::Dns(i))
        } else if let Some(i) = index("kubernetes[") {
            Ok(SourceName::Kubernetes(i))
        } else if name == "config" || name.starts_with("inventory:") || name.is_empty() {
            Err(format!(
                "source \"{name}\": that name is the configuration's own; feed a source of another name"
            ))
        } else {
            Ok(SourceName::Other(name.into()))
        }
    }

    /// What `GET /jolokia/targets` says of a target from this source (never
    /// a file path).
    pub fn origin(&self) -> Origin {
        match self {
            SourceName::Config => Origin::Configured,
            SourceName::Inventory { .. } => Origin::Inventory,
            other => Origin::Discovered(other.to_string().into()),
        }
    }

    /// Whether a reload replaces this source (the configuration and its
    /// inventory files); discovery sources keep running.
    pub fn is_configured(&self) -> bool {
        matches!(self, SourceName::Config | SourceName::Inventory { .. })
    }
}

impl std::fmt::Display for SourceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceName::Config => f.write_str("config"),
            SourceName::Inventory { file, .. } => write!(f, "inventory:{file}"),
            SourceName::Dns(i) => write!(f, "dns[{i}]"),
            SourceName::Kubernetes(i) => write!(f, "kubernetes[{i}]"),
            SourceName::Other(name) => f.write_str(name),
        }
    }
}

/// What a source says.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The source's whole listing: its targets not in it leave.
    Restart(Vec<TargetConfig>),
    /// Targets added or changed (by name) and names gone; the source's
    /// other targets stay as they are, connections and all.
    Apply {
        /// Shared with the source's own record of them: the source book
        /// keeps these, not copies.
        upserts: Vec<std::sync::Arc<TargetConfig>>,
        removed: Vec<String>,
    },
    /// Whether the source's last listing (a resolution, a watch, a read)
    /// succeeded; while it fails its last targets are kept.
    Up(bool),
}

/// One event of one source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceEvent {
    pub source: SourceName,
    pub change: Change,
}

/// A name a source lists that another source keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    pub name: String,
    pub shadowed: SourceName,
    pub kept_by: SourceName,
}

/// Some sources' listings, each whole: the configured ones at a start or
/// reload (`[[targets]]` as `config`, each `[[inventory]]` file by its
/// place).
pub type Listings = Vec<(SourceName, Vec<TargetConfig>)>;

/// Every source's listing, and who keeps each name.
#[derive(Debug, Clone, Default)]
pub struct SourceBook {
    /// Each source's targets (the first of two with one name), in the
    /// order listed; a source with none has no entry.
    listings: BTreeMap<SourceName, IndexMap<String, std::sync::Arc<TargetConfig>>>,
    /// Each listed name, the sources listing it in the rule's order: the
    /// first keeps it. Nearly always one: held inline, not in an
    /// allocation of its own per target.
    holders: HashMap<String, SmallVec<[SourceName; 1]>>,
    /// The names each source lists and another keeps.
    shadowed: BTreeMap<SourceName, HashSet<String>>,
    /// Each source heard of, and whether its last listing succeeded.
    up: BTreeMap<SourceName, bool>,
}

/// What one event changes: in its source's listing and in the fleet.
/// Made by [`SourceBook::plan`], made true by [`SourceBook::commit`].
#[derive(Debug)]
pub struct Plan {
    pub source: SourceName,
    listing: FleetChange,
    /// The targets the fleet gets (each the keeper's) and the names it loses.
    pub fleet: FleetChange,
}

impl Plan {
    /// True when the event changes nothing at all.
    pub fn is_empty(&self) -> bool {
        self.listing.upserts.is_empty() && self.listing.removed.is_empty()
    }
}

impl SourceBook {
    /// What `change` (a listing, not [`Change::Up`]) from `source` changes.
    pub fn plan(&self, source: &SourceName, change: Change) -> Plan {
        let listing = change_for(self.listings.get(source), change, &source.origin());
        let mut fleet = FleetChange::default();
        for t in &listing.upserts {
            let keeper = self.keeper(&t.name);
            if keeper.is_none_or(|k| source <= k) {
                fleet.upserts.push(t.clone());
            }
        }
        for name in &listing.removed {
            if self.keeper(name) != Some(source) {
                continue;
            }
            let next = self.holders[name.as_str()]
                .iter()
                .find(|s| *s != source)
                .and_then(|s| self.listings.get(s)?.get(name.as_str()));
            match next {
                Some(t) => fleet.upserts.push(t.clone()),
                None => fleet.removed.push(name.clone()),
            }
        }
        Plan {
            source: source.clone(),
            listing,
            fleet,
        }
    }

    /// Makes `plan` true, leaving out the targets that `failed` to build
    /// (so the same listing later tries them again). Returns the names
    /// that now have a source they didn't have before shadowed, for the
    /// log (each once).
    pub fn commit(&mut self, plan: Plan, failed: &[(String, String)]) -> Vec<Collision> {
        let Plan {
            source, listing, ..
        } = plan;
        let mut touched: Vec<String> = Vec::new();
        let set = self.listings.entry(source.clone()).or_default();
        for name in &listing.removed {
            set.swap_remove(name);
        }
        for t in listing.upserts {
            set.insert(t.name.clone(), t);
        }
        if set.is_empty() {
            self.listings.remove(&source);
        }
        for name in listing.removed {
            self.unhold(&name, &source);
            touched.push(name);
        }
        for name in self
            .listings
            .get(&source)
            .into_iter()
            .flat_map(|set| set.keys())
        {
            let holders = self.holders.entry(name.clone()).or_default();
            if let Err(at) = holders.binary_search(&source) {
                holders.insert(at, source.clone());
                touched.push(name.clone());
            }
        }
        for (name, _) in failed {
            if let Some(keeper) = self.keeper(name).cloned() {
                if let Some(set) = self.listings.get_mut(&keeper) {
                    set.swap_remove(name.as_str());
                    if set.is_empty() {
                        self.listings.remove(&keeper);
                    }
                }
                self.unhold(name, &keeper);
                touched.push(name.clone());
            }
        }
        self.settle(touched)
    }

    /// Replaces the configured sources (the configuration's targets, each
    /// inventory file's) by `configured`; an inventory no longer listed
    /// goes with its targets. Returns the newly shadowed names and the
    /// sources gone.
    pub fn replace_configured(
        &mut self,
        configured: Listings,
    ) -> (Vec<Collision>, Vec<SourceName>) {
        let mut touched = Vec::new();
        let old: std::collections::BTreeSet<SourceName> = self
            .up
            .keys()
            .chain(self.listings.keys())
            .filter(|s| s.is_configured())
            .cloned()
            .collect();
        for source in &old {
            if let Some(set) = self.listings.remove(source) {
                for name in set.into_keys() {
                    self.unhold(&name, source);
                    touched.push(name);
                }
            }
            self.up.remove(source);
        }
        for (source, targets) in configured {
            let origin = source.origin();
            let set = self.listings.entry(source.clone()).or_default();
            // Grown once to its size, not by doubling (a third idle at
            // 100,000 targets).
            set.reserve_exact(targets.len());
            for mut t in targets {
                t.origin = origin.clone();
                if set.contains_key(&t.name) {
                    continue;
                }
                let holders = self.holders.entry(t.name.clone()).or_default();
                if let Err(at) = holders.binary_search(&source) {
                    holders.insert(at, source.clone());
                }
                touched.push(t.name.clone());
                set.insert(t.name.clone(), std::sync::Arc::new(t));
            }
            if set.is_empty() {
                self.listings.remove(&source);
            }
            self.up.insert(source, true);
        }
        let gone = old
            .into_iter()
            .filter(|s| !self.up.contains_key(s))
            .collect();
        (self.settle(touched), gone)
    }

    /// Records whether `source`'s last listing succeeded; true when that
    /// is news.
    pub fn set_up(&mut self, source: &SourceName, up: bool) -> bool {
        self.up.insert(source.clone(), up) != Some(up)
    }

    /// Every source heard of and whether its last listing succeeded.
    pub fn up(&self) -> impl Iterator<Item = (&SourceName, bool)> {
        self.up.iter().map(|(s, up)| (s, *up))
    }

    /// How many names each source lists that another keeps.
    pub fn shadowed(&self) -> impl Iterator<Item = (&SourceName, usize)> {
        self.shadowed.iter().map(|(s, names)| (s, names.len()))
    }

    /// The fleet these listings make: each name once, its keeper's
    /// target; sources in the rule's order, the configuration's and
    /// inventories' targets as listed, a discovery source's by name (the
    /// same order whatever its history).
    pub fn fleet_targets(&self) -> Vec<TargetConfig> {
        let mut out = Vec::with_capacity(self.holders.len());
        for (source, set) in &self.listings {
            let mut targets: Vec<&TargetConfig> = set
                .values()
                .map(|t| &**t)
                .filter(|t| self.keeper(&t.name) == Some(source))
                .collect();
            if !source.is_configured() {
                targets.sort_by(|a, b| a.name.cmp(&b.name));
            }
            out.extend(targets.into_iter().cloned());
        }
        out
    }

    /// The targets `source` lists, in the order listed.
    pub fn listing(&self, source: &SourceName) -> Vec<&TargetConfig> {
        self.listings
            .get(source)
            .map(|set| set.values().map(|t| &**t).collect())
            .unwrap_or_default()
    }

    fn keeper(&self, name: &str) -> Option<&SourceName> {
        self.holders.get(name).and_then(|h| h.first())
    }

    fn unhold(&mut self, name: &str, source: &SourceName) {
        if let Some(holders) = self.holders.get_mut(name) {
            holders.retain(|s| s != source);
            if holders.is_empty() {
                self.holders.remove(name);
            }
        }
        if let Some(names) = self.shadowed.get_mut(source) {
            names.remove(name);
            if names.is_empty() {
                self.shadowed.remove(source);
            }
        }
    }

    /// Brings `shadowed` up to date for `names`; returns what is new.
    fn settle(&mut self, mut names: Vec<String>) -> Vec<Collision> {
        names.sort_unstable();
        names.dedup();
        let mut newly = Vec::new();
        for name in names {
            let Some((keeper, rest)) = self.holders.get(&name).and_then(|h| h.split_first()) else {
                continue;
            };
            if let Some(set) = self.shadowed.get_mut(keeper) {
                set.remove(&name);
                if set.is_empty() {
                    self.shadowed.remove(keeper);
                }
            }
            for source in rest {
                if self
                    .shadowed
                    .entry(source.clone())
                    .or_default()
                    .insert(name.clone())
                {
                    newly.push(Collision {
                        name: name.clone(),
                        shadowed: source.clone(),
                        kept_by: keeper.clone(),
                    });
                }
            }
        }
        newly
    }
}

/// What `found` changes in a source's listing `before`, each target marked
/// with `origin`. Targets equal to the ones held are no change; a
/// removed name the source doesn't hold is none either; of two targets
/// with one name the first counts.
fn change_for(
    before: Option<&IndexMap<String, std::sync::Arc<TargetConfig>>>,
    found: Change,
    origin: &Origin,
) -> FleetChange {
    let held = |name: &str| before.and_then(|set| set.get(name));
    let mut change = FleetChange::default();
    let (upserts, removed) = match found {
        Change::Restart(targets) => {
            let now: HashSet<&str> = targets.iter().map(|t| t.name.as_str()).collect();
            let removed = before
                .into_iter()
                .flat_map(|set| set.keys())
                .filter(|name| !now.contains(name.as_str()))
                .cloned()
                .collect();
            drop(now);
            (
                targets.into_iter().map(std::sync::Arc::new).collect(),
                removed,
            )
        }
        Change::Apply { upserts, removed } => (upserts, removed),
        Change::Up(_) => (Vec::new(), Vec::new()),
    };
    let mut named = HashSet::new();
    for mut t in upserts {
        if t.origin != *origin {
            std::sync::Arc::make_mut(&mut t).origin = origin.clone();
        }
        if named.insert(t.name.clone()) && held(&t.name) != Some(&t) {
            change.upserts.push(t);
        }
    }
    change.removed = removed
        .into_iter()
        .filter(|name| held(name).is_some() && !named.contains(name))
        .collect();
    change
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, port: u16) -> TargetConfig {
        TargetConfig::new(name.to_string(), format!("http://127.0.0.1:{port}/jolokia"))
    }

    fn names<T: std::borrow::Borrow<TargetConfig>>(ts: &[T]) -> Vec<&str> {
        ts.iter().map(|t| t.borrow().name.as_str()).collect()
    }

    fn fold(book: &mut SourceBook, source: &SourceName, change: Change) -> FleetChange {
        let plan = book.plan(source, change);
        let fleet = FleetChange {
            upserts: plan.fleet.upserts.clone(),
            removed: plan.fleet.removed.clone(),
        };
        book.commit(plan, &[]);
        fleet
    }

    fn inventory(position: usize) -> SourceName {
        SourceName::Inventory {
            position,
            file: format!("inv{position}.yaml").into(),
        }
    }

    #[test]
    fn the_rule_orders_configuration_inventories_dns_kubernetes_then_others() {
        let mut order = [
            SourceName::Other("a-registry".into()),
            SourceName::Kubernetes(0),
            SourceName::Dns(10),
            SourceName::Dns(2),
            inventory(1),
            inventory(0),
            SourceName::Config,
        ];
        order.sort();
        let shown: Vec<String> = order.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "config",
                "inventory:inv0.yaml",
                "inventory:inv1.yaml",
                "dns[2]",
                "dns[10]",
                "kubernetes[0]",
                "a-registry"
            ]
        );
        assert_eq!(SourceName::named("dns[3]"), Ok(SourceName::Dns(3)));
        assert_eq!(
            SourceName::named("kubernetes[1]"),
            Ok(SourceName::Kubernetes(1))
        );
        assert_eq!(
            SourceName::named("dns"),
            Ok(SourceName::Other("dns".into()))
        );
        for taken in ["config", "inventory:x.yaml", ""] {
            assert!(SourceName::named(taken).is_err(), "{taken}");
        }
        assert_eq!(SourceName::Dns(0).origin().to_string(), "discovery.dns[0]");
        assert_eq!(inventory(0).origin().to_string(), "inventory");
    }

    #[test]
    fn a_listing_changes_only_what_differs() {
        let mut book = SourceBook::default();
        let dns = SourceName::Dns(0);
        let first = fold(
            &mut book,
            &dns,
            Change::Restart(vec![target("a", 1), target("b", 1), target("a", 9)]),
        );
        // The first of two with one name counts.
        assert_eq!(names(&first.upserts), ["a", "b"]);
        assert_eq!(first.upserts[0].url, "http://127.0.0.1:1/jolokia");
        assert_eq!(first.upserts[0].origin.to_string(), "discovery.dns[0]");
        let again = book.plan(&dns, Change::Restart(vec![target("a", 1), target("b", 1)]));
        assert!(again.is_empty());
        let next = fold(
            &mut book,
            &dns,
            Change::Restart(vec![target("b", 2), target("c", 1)]),
        );
        assert_eq!(names(&next.upserts), ["b", "c"]);
        assert_eq!(next.removed, ["a"]);
        let applied = fold(
            &mut book,
            &dns,
            Change::Apply {
                upserts: vec![target("d", 1).into()],
                removed: vec!["c".into(), "never-there".into()],
            },
        );
        assert_eq!(names(&applied.upserts), ["d"]);
        assert_eq!(applied.removed, ["c"]);
        assert_eq!(names(&book.fleet_targets()), ["b", "d"]);
    }

    #[test]
    fn a_name_two_sources_list_is_kept_by_the_first_in_the_rule() {
        let mut book = SourceBook::default();
        let (dns0, dns1, k8s) = (
            SourceName::Dns(0),
            SourceName::Dns(1),
            SourceName::Kubernetes(0),
        );
        let (collisions, gone) =
            book.replace_configured(vec![(SourceName::Config, vec![target("main", 1)])]);
        assert!(collisions.is_empty() && gone.is_empty());
        // Kubernetes first has "x"; dns[1], earlier in the rule, takes it.
        fold(&mut book, &k8s, Change::Restart(vec![target("x", 3)]));
        let taken = book.plan(&dns1, Change::Restart(vec![target("x", 2)]));
        assert_eq!(names(&taken.fleet.upserts), ["x"]);
        assert_eq!(taken.fleet.upserts[0].url, "http://127.0.0.1:2/jolokia");
        let collisions = book.commit(taken, &[]);
        assert_eq!(
            collisions,
            [Collision {
                name: "x".into(),
                shadowed: k8s.clone(),
                kept_by: dns1.clone()
            }]
        );
        // dns[0] lists it too: it is the keeper now; Kubernetes is not
        // told again, dns[1] is.
        let plan = book.plan(&dns0, Change::Restart(vec![target("x", 1)]));
        let collisions = book.commit(plan, &[]);
        assert_eq!(
            collisions,
            [Collision {
                name: "x".into(),
                shadowed: dns1.clone(),
                kept_by: dns0.clone()
            }]
        );
        // A configured name wins over every source, and a listing that
        // loses changes nothing in the fleet.
        let lost = book.plan(
            &dns0,
            Change::Restart(vec![target("x", 1), target("main", 7)]),
        );
        assert!(lost.fleet.upserts.is_empty() && lost.fleet.removed.is_empty());
        book.commit(lost, &[]);
        let counts: Vec<(String, usize)> =
            book.shadowed().map(|(s, n)| (s.to_string(), n)).collect();
        assert_eq!(
            counts,
            [
                ("dns[0]".to_string(), 1),
                ("dns[1]".to_string(), 1),
                ("kubernetes[0]".to_string(), 1)
            ]
        );
        // The keeper lets go: the next source's target takes its place.
        let handed = fold(&mut book, &dns0, Change::Restart(vec![]));
        assert_eq!(names(&handed.upserts), ["x"]);
        assert_eq!(handed.upserts[0].url, "http://127.0.0.1:2/jolokia");
        assert!(handed.removed.is_empty());
        // The last one lets go: the name leaves the fleet.
        fold(&mut book, &dns1, Change::Restart(vec![]));
        let last = fold(&mut book, &k8s, Change::Restart(vec![]));
        assert_eq!(last.removed, ["x"]);
        assert_eq!(names(&book.fleet_targets()), ["main"]);
        assert_eq!(book.shadowed().count(), 0);
    }

    #[test]
    fn a_reload_replaces_the_configured_sources_and_keeps_the_discovered() {
        let mut book = SourceBook::default();
        book.replace_configured(vec![
            (SourceName::Config, vec![target("main", 1)]),
            (inventory(0), vec![target("kafka-1", 1), target("main", 2)]),
            (inventory(1), vec![target("zk-1", 1)]),
        ]);
        fold(
            &mut book,
            &SourceName::Dns(0),
            Change::Restart(vec![target("zk-1", 5), target("web-1", 1)]),
        );
        assert_eq!(
            names(&book.fleet_targets()),
            ["main", "kafka-1", "zk-1", "web-1"]
        );
        assert_eq!(book.fleet_targets()[2].origin.to_string(), "inventory");
        book.set_up(&SourceName::Dns(0), false);
        // inv1 leaves the configuration: its targets go, DNS's zk-1 comes in.
        let (collisions, gone) = book.replace_configured(vec![
            (SourceName::Config, vec![target("main", 1)]),
            (inventory(0), vec![target("kafka-1", 1)]),
        ]);
        assert!(collisions.is_empty(), "{collisions:?}");
        assert_eq!(gone, [inventory(1)]);
        let fleet = book.fleet_targets();
        assert_eq!(names(&fleet), ["main", "kafka-1", "web-1", "zk-1"]);
        assert_eq!(fleet[3].url, "http://127.0.0.1:5/jolokia");
        let up: Vec<(String, bool)> = book.up().map(|(s, u)| (s.to_string(), u)).collect();
        assert_eq!(
            up,
            [
                ("config".to_string(), true),
                ("inventory:inv0.yaml".to_string(), true),
                ("dns[0]".to_string(), false)
            ]
        );
    }

    #[test]
    fn a_target_that_failed_to_build_is_tried_again_by_the_same_listing() {
        let mut book = SourceBook::default();
        let k8s = SourceName::Kubernetes(0);
        let plan = book.plan(
            &k8s,
            Change::Restart(vec![target("p1", 1), target("p2", 1)]),
        );
        book.commit(plan, &[("p2".into(), "no password file".into())]);
        assert_eq!(names(&book.fleet_targets()), ["p1"]);
        let again = book.plan(
            &k8s,
            Change::Restart(vec![target("p1", 1), target("p2", 1)]),
        );
        assert_eq!(names(&again.fleet.upserts), ["p2"]);
    }
}
