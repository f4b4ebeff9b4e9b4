//! A target's labels: a few key/value strings, sorted by key, that every
//! replica holds for every target of the fleet. A leaf module.
//!
//! A `BTreeMap<String, String>` of eight labels costs about 900 bytes: a
//! node sized for eleven entries and sixteen small strings. Most of those
//! strings repeat over the fleet (the keys, a namespace, a node, an app);
//! only a Pod's name is its own. So the set is one slice of shared
//! strings, and [`LabelPool`] hands out one copy of each string to the
//! sets made through it.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// A target's labels, sorted by key, each key once. Cloning shares the
/// set; an empty set allocates nothing.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Option<Arc<[Pair]>>);

/// A key and its value.
type Pair = (Arc<str>, Arc<str>);

impl Labels {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let pairs = self.pairs();
        pairs
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*pairs[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The labels in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &str)> + ExactSizeIterator + '_ {
        self.pairs().iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn values(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.pairs().len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs().is_empty()
    }

    /// A map of copies, for code that edits a set before making another.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// True when both are the same allocation (or both empty).
    #[cfg(test)]
    fn shares_with(&self, other: &Labels) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    fn pairs(&self) -> &[Pair] {
        self.0.as_deref().unwrap_or_default()
    }

    /// From pairs already sorted by key, each key once.
    fn from_sorted(pairs: Vec<Pair>) -> Labels {
        if pairs.is_empty() {
            Labels(None)
        } else {
            Labels(Some(pairs.into()))
        }
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Labels {
        Labels::from_sorted(
            map.into_iter()
                .map(|(k, v)| (Arc::from(k), Arc::from(v)))
                .collect(),
        )
    }
}

/// Later pairs win over earlier ones with the same key, as in a map.
impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Labels {
        let map: BTreeMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
            .collect();
        Labels::from(map)
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Pair>, fn(&'a Pair) -> (&'a str, &'a str)>;

    fn into_iter(self) -> Self::IntoIter {
        fn pair(p: &Pair) -> (&str, &str) {
            (&p.0, &p.1)
        }
        self.pairs().iter().map(pair)
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl serde::Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for Labels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Labels, D::Error> {
        BTreeMap::<String, String>::deserialize(d).map(Labels::from)
    }
}

/// One copy of each label string for the sets made through it, and one
/// set for equal sets. Strings no set holds any more go at
/// [`prune`](Self::prune), so a pool that outlives many Pods (a
/// discovery's) holds only what its current sets hold.
#[derive(Debug, Default)]
pub struct LabelPool {
    strings: HashSet<Arc<str>>,
    sets: HashSet<Labels>,
    since_prune: usize,
}

impl LabelPool {
    const PRUNE_EVERY: usize = 4096;

    /// `labels` again, sharing this pool's strings (or an equal set made
    /// before).
    pub fn intern(&mut self, labels: &Labels) -> Labels {
        if let Some(known) = self.sets.get(labels) {
            return known.clone();
        }
        let pairs = labels
            .iter()
            .map(|(k, v)| (self.string(k), self.string(v)))
            .collect();
        self.share(Labels::from_sorted(pairs))
    }

    /// An equal set made before, or `labels` itself, now known.
    pub fn share(&mut self, labels: Labels) -> Labels {
        if let Some(known) = self.sets.get(&labels) {
            return known.clone();
        }
        self.sets.insert(labels.clone());
        self.since_prune += 1;
        // Amortised: a pool fed a Pod at a time forgets the gone ones
        // without anyone calling `prune`.
        if self.since_prune >= Self::PRUNE_EVERY.max(self.sets.len() / 2) {
            self.prune();
        }
        labels
    }

    fn string(&mut self, text: &str) -> Arc<str> {
        if let Some(known) = self.strings.get(text) {
            return known.clone();
        }
        let fresh: Arc<str> = Arc::from(text);
        self.strings.insert(fresh.clone());
        fresh
    }

    /// Forgets the sets and strings only this pool still holds.
    pub fn prune(&mut self) {
        self.since_prune = 0;
        self.sets
            .retain(|l| l.0.as_ref().is_none_or(|a| Arc::strong_count(a) > 1));
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.sets.shrink_to_fit();
        self.strings.shrink_to_fit();
    }

    #[cfg(test)]
    fn strings_held(&self) -> usize {
        self.strings.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_set_answers_as_the_map_it_came_from() {
        let m = map(&[("pod", "a-1"), ("app", "shop"), ("namespace", "prod")]);
        let l = Labels::from(m.clone());
        assert_eq!(l.len(), 3);
        assert_eq!(l.get("app"), Some("shop"));
        assert_eq!(l.get("pod"), Some("a-1"));
        assert_eq!(l.get("zone"), None);
        assert_eq!(l.to_map(), m);
        let keys: Vec<&str> = l.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["app", "namespace", "pod"]);
        assert_eq!(
            serde_json::to_string(&l).unwrap(),
            serde_json::to_string(&m).unwrap()
        );
        let back: Labels = serde_json::from_str(r#"{"b":"2","a":"1"}"#).unwrap();
        assert_eq!(back, Labels::from(map(&[("a", "1"), ("b", "2")])));
        assert_eq!(format!("{back:?}"), r#"{"a": "1", "b": "2"}"#);
    }

    #[test]
    fn later_pairs_win_and_empty_sets_are_equal() {
        let l: Labels = [("a", "1"), ("a", "2")].into_iter().collect();
        assert_eq!(l.get("a"), Some("2"));
        assert_eq!(Labels::default(), Labels::from(BTreeMap::new()));
        assert!(Labels::default().is_empty());
    }

    #[test]
    fn a_pool_shares_strings_and_sets_and_forgets_what_no_set_holds() {
        let mut pool = LabelPool::default();
        let a = pool.intern(&Labels::from(map(&[("namespace", "prod"), ("pod", "a-1")])));
        let b = pool.intern(&Labels::from(map(&[("namespace", "prod"), ("pod", "b-1")])));
        let again = pool.intern(&Labels::from(map(&[("namespace", "prod"), ("pod", "a-1")])));
        assert!(again.shares_with(&a));
        assert!(pool
            .intern(&Labels::from(map(&[("namespace", "prod"), ("pod", "a-1")])))
            .shares_with(&a));
        assert!(!b.shares_with(&a));
        // Both sets hold one "namespace" and one "prod".
        assert!(Arc::ptr_eq(&a.pairs()[0].1, &b.pairs()[0].1));
        assert_eq!(pool.strings_held(), 5);
        drop((a, again));
        pool.prune();
        assert_eq!(pool.strings_held(), 4, "a-1 forgotten");
        drop(b);
        pool.prune();
        assert_eq!(pool.strings_held(), 0);
    }
}
