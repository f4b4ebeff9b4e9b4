//! Rendezvous (highest-random-weight) hashing: a duty's owner is the live
//! member whose weight for the duty's key is highest. Every replica that
//! sees the same members picks the same owner; when a member joins or
//! leaves, only the duties it wins or held move (about 1/N of them), none
//! between the members that stay (unlike `hashmod`, which reshuffles
//! almost all when N changes).
//!
//! The weight is the first 8 bytes of SHA-256 over the member's id and the
//! key, each length-prefixed (so `("ab", "c")` and `("a", "bc")` differ):
//! the same on every platform and in every release, which a replica set
//! mixing two versions during a rolling upgrade needs. The key is a stable
//! name (a target's name, never its labels, which change).

use sha2::{Digest, Sha256};

/// The weight of `member` for `key`.
pub fn weight(member: &str, key: &str) -> u64 {
    let mut hash = Sha256::new();
    for part in [member, key] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("SHA-256 has 32 bytes"))
}

/// The owner of `key` among `members`: the highest weight, ties (never
/// seen in practice) to the smaller id so that every replica agrees.
/// `None` without members.
pub fn owner<'m, M: AsRef<str>>(key: &str, members: &'m [M]) -> Option<&'m str> {
    members
        .iter()
        .map(AsRef::as_ref)
        .max_by(|a, b| weight(a, key).cmp(&weight(b, key)).then_with(|| b.cmp(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("jmxgate-{i}")).collect()
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("orders-{i}")).collect()
    }

    #[test]
    fn the_owner_depends_on_the_members_not_their_order() {
        let mut m = members(5);
        let before: Vec<_> = keys(200)
            .iter()
            .map(|k| owner(k, &m).unwrap().to_string())
            .collect();
        m.reverse();
        m.swap(1, 3);
        let after: Vec<_> = keys(200)
            .iter()
            .map(|k| owner(k, &m).unwrap().to_string())
            .collect();
        assert_eq!(before, after);
        assert_eq!(owner::<String>("orders-1", &[]), None);
        assert_eq!(owner("orders-1", &["only"]), Some("only"));
    }

    #[test]
    fn duties_spread_over_the_members() {
        let m = members(4);
        let mut counts = std::collections::HashMap::new();
        for k in keys(4000) {
            *counts.entry(owner(&k, &m).unwrap()).or_insert(0usize) += 1;
        }
        assert_eq!(counts.len(), 4);
        // 1,000 each on average; a fair hash stays well within ±20 %.
        for (member, n) in counts {
            assert!((800..=1200).contains(&n), "{member}: {n}");
        }
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_duties_and_one_joining_takes_about_its_share() {
        let five = members(5);
        let four: Vec<String> = five.iter().filter(|m| *m != "jmxgate-2").cloned().collect();
        let all = keys(5000);
        let mut moved = 0;
        for k in &all {
            let was = owner(k, &five).unwrap();
            let now = owner(k, &four).unwrap();
            if was == "jmxgate-2" {
                moved += 1;
            } else {
                // Nothing moves between the members that stay.
                assert_eq!(was, now, "{k}");
            }
        }
        // The leaver held about a fifth.
        assert!((800..=1200).contains(&moved), "{moved}");
        // Joining again takes back exactly what it held.
        for k in &all {
            let back = owner(k, &five).unwrap();
            let without = owner(k, &four).unwrap();
            assert!(back == without || back == "jmxgate-2", "{k}");
        }
    }

    #[test]
    fn the_weight_is_fixed_across_releases_and_parts_do_not_run_together() {
        // Pinned: replicas of two releases must agree during an upgrade,
        // so a change of this number is a change of every duty's owner.
        let pinned = weight("jmxgate-0", "orders-1");
        assert_eq!(pinned, 5974421836854395140);
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
        let mut hash = Sha256::new();
        hash.update(9u64.to_be_bytes());
        hash.update(b"jmxgate-0");
        hash.update(8u64.to_be_bytes());
        hash.update(b"orders-1");
        let d = hash.finalize();
        assert_eq!(pinned, u64::from_be_bytes(d[..8].try_into().unwrap()));
    }
}
