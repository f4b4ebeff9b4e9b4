//! What one replica knows of the cluster, pure: which members are live,
//! judged only by this replica's own clock or the engine's (never by
//! comparing another replica's written time with this one's clock), and
//! which duties are this replica's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::rendezvous;

/// A member record as the engine showed it on one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The member's replica id.
    pub id: String,
    /// Changes whenever the member renews (a Lease's `resourceVersion`,
    /// a row's renewal time as the database wrote it): compared only
    /// with itself.
    pub token: String,
    /// How long ago it renewed by the engine's own clock, when the engine
    /// can tell (PostgreSQL's `now()`); `None`: judged by when this
    /// replica saw `token` change (Kubernetes, as client-go's leader
    /// election does).
    pub age: Option<Duration>,
    /// Where its admin listener is (its `cluster.advertise_url`), as the
    /// member wrote it.
    pub admin_url: Option<String>,
}

/// A live member.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Member {
    pub id: String,
    /// How long ago it renewed, as this replica judges it.
    #[serde(serialize_with = "millis")]
    pub renewed_ago: Duration,
    /// Where the other replicas read its health probes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_url: Option<Arc<str>>,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// The records' tokens and when this replica saw each change.
#[derive(Debug)]
pub struct Liveness {
    lease: Duration,
    /// This replica's own id: live from its first read.
    me: String,
    /// Each record's token, when this replica saw it last change, and
    /// whether it has seen it change at all.
    changed: HashMap<String, (String, Instant, bool)>,
}

impl Liveness {
    pub fn new(lease: Duration, me: &str) -> Liveness {
        Liveness {
            lease,
            me: me.to_string(),
            changed: HashMap::new(),
        }
    }

    /// The live members among one read's records, `now` being when the
    /// read came back. With the engine's own age of a record
    /// (PostgreSQL), live while that is under the lease. Without it
    /// (Kubernetes), live once this replica has seen the record change
    /// and until it stays unchanged for the lease: a record first seen
    /// may be a leftover of a replica that crashed a moment ago, and
    /// counting it would leave its share undone for a whole lease after
    /// this replica joined; a live member renews within a renewal, so
    /// waiting for that costs at most a renewal of work done twice.
    pub fn fold(&mut self, seen: &[Seen], now: Instant) -> Vec<Member> {
        self.changed
            .retain(|id, _| seen.iter().any(|s| s.id == *id));
        let mut live = Vec::new();
        for s in seen {
            let entry = self
                .changed
                .entry(s.id.clone())
                .or_insert_with(|| (s.token.clone(), now, false));
            if entry.0 != s.token {
                *entry = (s.token.clone(), now, true);
            }
            let confirmed = entry.2 || s.age.is_some() || s.id == self.me;
            let ago = s
                .age
                .unwrap_or_else(|| now.saturating_duration_since(entry.1));
            if confirmed && ago < self.lease {
                live.push(Member {
                    id: s.id.clone(),
                    renewed_ago: ago,
                    admin_url: s.admin_url.as_deref().map(Arc::from),
                });
            }
        }
        live.sort_by(|a, b| a.id.cmp(&b.id));
        live.dedup_by(|a, b| a.id == b.id);
        live
    }

    /// Records unchanged (by this replica's clock) for `for_at_least`:
    /// leftovers of replicas that stopped without leaving, which any
    /// member may delete (on the condition the record is still the one
    /// seen, so a live member is never deleted).
    pub fn stale(&self, for_at_least: Duration, now: Instant) -> Vec<(&str, &str)> {
        self.changed
            .iter()
            .filter(|(_, (_, at, _))| now.saturating_duration_since(*at) >= for_at_least)
            .map(|(id, (token, _, _))| (id.as_str(), token.as_str()))
            .collect()
    }
}

/// Whether this replica does background work now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Duties {
    /// Its share of every duty (all of them when alone).
    Active,
    /// None yet: `wait_for_members` members are not seen yet and
    /// `wait_timeout` has not passed.
    Waiting { members: usize, wanted: usize },
    /// None: another instance holds this replica id now (this one lost
    /// its record, paused or cut off past its lease).
    Fenced { why: String },
}

/// One replica's view of the cluster, published whole on every change.
#[derive(Debug, Clone)]
pub struct View {
    /// This replica's id.
    pub me: Arc<str>,
    /// The engine (`kubernetes`, `postgres`); `None`: no `[cluster]`,
    /// this replica alone does everything.
    pub engine: Option<&'static str>,
    /// Live members, by id (this replica among them once it has joined).
    pub members: Arc<[Member]>,
    /// The members' ids, in the same order, for hashing.
    ids: Arc<[String]>,
    pub duties: Duties,
    /// Why the engine could not be read or written lately (the members
    /// are then the last ones seen).
    pub trouble: Option<String>,
    /// This replica's epoch (the PostgreSQL fencing token, or the Lease's
    /// transitions), when the engine has one.
    pub epoch: Option<i64>,
    /// Bumped whenever who owns what may have changed.
    pub generation: u64,
}

impl View {
    /// One replica alone: it owns everything.
    pub fn solo(me: &str) -> View {
        View {
            me: me.into(),
            engine: None,
            members: vec![Member {
                id: me.to_string(),
                renewed_ago: Duration::ZERO,
                admin_url: None,
            }]
            .into(),
            ids: vec![me.to_string()].into(),
            duties: Duties::Active,
            trouble: None,
            epoch: None,
            generation: 0,
        }
    }

    /// The same view, of a replica that joined through `engine`.
    pub fn of_engine(mut self, engine: &'static str, epoch: Option<i64>) -> View {
        self.engine = Some(engine);
        self.epoch = epoch;
        self
    }

    /// The view after a read: `members` live, `duties` as decided. The
    /// generation moves only when the ids or the duties changed.
    pub fn next(&self, members: Vec<Member>, duties: Duties, trouble: Option<String>) -> View {
        let ids: Vec<String> = members.iter().map(|m| m.id.clone()).collect();
        let moved = *ids != *self.ids || duties != self.duties;
        View {
            me: self.me.clone(),
            engine: self.engine,
            members: members.into(),
            ids: ids.into(),
            duties,
            trouble,
            epoch: self.epoch,
            generation: self.generation + u64::from(moved),
        }
    }

    /// The member that owns `key` (a target's name, an export and a
    /// target), as every replica with the same members computes it.
    pub fn owner(&self, key: &str) -> Option<&str> {
        rendezvous::owner(key, &self.ids)
    }

    /// `me`'s view with `members` live and its duties active.
    #[cfg(test)]
    pub fn of_members(me: &str, members: &[&str]) -> View {
        View::solo(me).next(
            members
                .iter()
                .map(|id| Member {
                    id: id.to_string(),
                    renewed_ago: Duration::ZERO,
                    admin_url: None,
                })
                .collect(),
            Duties::Active,
            None,
        )
    }

    /// Whether this replica does the duty of `key` now.
    pub fn owns(&self, key: &str) -> bool {
        self.duties == Duties::Active && self.owner(key) == Some(&*self.me)
    }

    /// Whether this replica owns `key` now and did not in `before`, an
    /// earlier view: a duty taken over, to be done at once rather than
    /// at its next turn.
    pub fn took_over(&self, before: &View, key: &str) -> bool {
        self.owns(key) && !before.owns(key)
    }

    /// Whether a member of that id is live.
    pub fn has_member(&self, id: &str) -> bool {
        self.ids.iter().any(|m| m == id)
    }

    /// The live members' ids.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }
}

/// The duties of a replica that has just joined and read the members
/// once. With an engine that knows the records' ages, as
/// [`duties_after`]. Without (Kubernetes), none yet, whatever it saw:
/// its first read cannot tell a live member's Lease from a crashed one's
/// (see [`Liveness::fold`]), and doing every unconfirmed member's share
/// would have each key done by every replica that joined within a
/// renewal. The next read, a renewal later, decides; meanwhile the others
/// do the work, as they did before it came.
pub fn duties_at_join(
    knows_ages: bool,
    members: usize,
    wanted: usize,
    timeout: Duration,
) -> Duties {
    let waiting = Duties::Waiting { members, wanted };
    if knows_ages {
        duties_after(&waiting, members, wanted, Duration::ZERO, timeout)
    } else {
        waiting
    }
}

/// Whether to do background work yet: `wanted` members seen, or the wait
/// began `waited` ago and `timeout` passed. Once active, a replica stays
/// active (a member leaving later is churn, not a reason to stop).
pub fn duties_after(
    was: &Duties,
    members: usize,
    wanted: usize,
    waited: Duration,
    timeout: Duration,
) -> Duties {
    match was {
        Duties::Fenced { .. } => was.clone(),
        Duties::Active => Duties::Active,
        Duties::Waiting { .. } if members >= wanted || waited >= timeout => Duties::Active,
        Duties::Waiting { .. } => Duties::Waiting { members, wanted },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    /// Keys whose owner differs between two views, counted from `me`'s side:
    /// those it took over and those it gave up, as `jobs/ownership.rs`
    /// counts `jmxgate_cluster_handoffs_total`.
    fn handoffs<'k>(before: &View, after: &View, keys: impl IntoIterator<Item = &'k str>) -> u64 {
        keys.into_iter()
            .filter(|k| before.owns(k) != after.owns(k))
            .count() as u64
    }

    fn seen(id: &str, token: &str) -> Seen {
        Seen {
            id: id.into(),
            token: token.into(),
            age: None,
            admin_url: None,
        }
    }

    fn ids(members: &[Member]) -> Vec<&str> {
        members.iter().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn a_lease_lives_while_it_changes_by_this_replicas_clock() {
        let t0 = Instant::now();
        let mut l = Liveness::new(LEASE, "a");
        // First seen: only this replica's own record is live; another's
        // counts once it changes (it may be a crashed replica's).
        let live = l.fold(&[seen("b", "0"), seen("a", "7")], t0);
        assert_eq!(ids(&live), ["a"]);
        let live = l.fold(&[seen("b", "1"), seen("a", "7")], t0);
        assert_eq!(ids(&live), ["a", "b"]);
        // a renews, b does not: past the lease b is gone.
        let live = l.fold(
            &[seen("b", "1"), seen("a", "8")],
            t0 + Duration::from_secs(10),
        );
        assert_eq!(ids(&live), ["a", "b"]);
        let live = l.fold(
            &[seen("b", "1"), seen("a", "9")],
            t0 + Duration::from_secs(16),
        );
        assert_eq!(ids(&live), ["a"]);
        assert_eq!(live[0].renewed_ago, Duration::ZERO);
        // b renews again: back at once.
        let live = l.fold(
            &[seen("b", "2"), seen("a", "9")],
            t0 + Duration::from_secs(17),
        );
        assert_eq!(ids(&live), ["a", "b"]);
        assert_eq!(live[0].renewed_ago, Duration::from_secs(1));
    }

    #[test]
    fn an_engine_that_knows_a_records_age_is_believed() {
        let t0 = Instant::now();
        let mut l = Liveness::new(LEASE, "me");
        let old = Seen {
            age: Some(Duration::from_secs(20)),
            ..seen("old", "x")
        };
        let fresh = Seen {
            age: Some(Duration::from_secs(2)),
            ..seen("fresh", "y")
        };
        assert_eq!(ids(&l.fold(&[old, fresh], t0)), ["fresh"]);
    }

    #[test]
    fn stale_records_are_those_unchanged_that_long_and_only_those() {
        let t0 = Instant::now();
        let mut l = Liveness::new(LEASE, "me");
        l.fold(&[seen("a", "1"), seen("b", "1")], t0);
        l.fold(
            &[seen("a", "2"), seen("b", "1")],
            t0 + Duration::from_secs(50),
        );
        assert_eq!(
            l.stale(Duration::from_secs(60), t0 + Duration::from_secs(61)),
            [("b", "1")]
        );
        // A record gone from the engine is forgotten.
        l.fold(&[seen("a", "2")], t0 + Duration::from_secs(62));
        assert!(l
            .stale(Duration::from_secs(0), t0 + Duration::from_secs(62))
            .iter()
            .all(|(id, _)| *id == "a"));
    }

    fn view(me: &str, members: &[&str]) -> View {
        View::of_members(me, members)
    }

    #[test]
    fn every_replica_agrees_on_one_owner_per_key() {
        let members = ["gw-0", "gw-1", "gw-2"];
        let views: Vec<View> = members.iter().map(|m| view(m, &members)).collect();
        for k in 0..300 {
            let key = format!("orders-{k}");
            let owners = views.iter().filter(|v| v.owns(&key)).count();
            assert_eq!(owners, 1, "{key}");
        }
    }

    /// A member lost: the survivors take over exactly its keys, and
    /// nothing they had counts as taken over.
    #[test]
    fn what_a_lost_member_owned_is_taken_over_and_nothing_else() {
        let keys: Vec<String> = (0..1000).map(|i| format!("t-{i}")).collect();
        let before: Vec<View> = ["a", "b", "c"]
            .iter()
            .map(|m| view(m, &["a", "b", "c"]))
            .collect();
        let after: Vec<View> = ["a", "b"].iter().map(|m| view(m, &["a", "b"])).collect();
        for k in &keys {
            let taken = (0..2)
                .filter(|&i| after[i].took_over(&before[i], k))
                .count();
            assert_eq!(taken, usize::from(before[2].owns(k)), "{k}");
        }
    }

    #[test]
    fn a_replica_waiting_or_fenced_owns_nothing_and_the_generation_says_so() {
        let v = view("gw-0", &["gw-0"]);
        assert!(v.owns("t"));
        let waiting = v.next(
            v.members.to_vec(),
            Duties::Waiting {
                members: 1,
                wanted: 3,
            },
            None,
        );
        assert!(!waiting.owns("t"));
        assert!(waiting.generation > v.generation);
        // Only ages changed: who owns what did not.
        let same = v.next(v.members.to_vec(), Duties::Active, None);
        assert_eq!(same.generation, v.generation);
    }

    #[test]
    fn waiting_ends_with_enough_members_or_the_timeout_and_fencing_stays() {
        let w = Duties::Waiting {
            members: 0,
            wanted: 3,
        };
        let s = Duration::from_secs;
        assert_eq!(
            duties_after(&w, 2, 3, s(5), s(60)),
            Duties::Waiting {
                members: 2,
                wanted: 3
            }
        );
        assert_eq!(duties_after(&w, 3, 3, s(5), s(60)), Duties::Active);
        assert_eq!(duties_after(&w, 1, 3, s(60), s(60)), Duties::Active);
        assert_eq!(
            duties_after(&Duties::Active, 1, 3, s(0), s(60)),
            Duties::Active
        );
        let fenced = Duties::Fenced { why: "x".into() };
        assert_eq!(duties_after(&fenced, 3, 1, s(0), s(0)), fenced);
    }

    /// Make-before-break: a replica that joins owns its share at once
    /// (in its own view), while the members that have not seen it yet
    /// keep theirs; so every key has an owner at every moment, and each
    /// key is done by at most two replicas until the others' next read.
    #[test]
    fn a_join_makes_before_it_breaks() {
        let old: Vec<View> = ["a", "b"].iter().map(|m| view(m, &["a", "b"])).collect();
        let joined = view("c", &["a", "b", "c"]);
        let keys: Vec<String> = (0..1000).map(|i| format!("t-{i}")).collect();
        for k in &keys {
            let doers = old.iter().filter(|v| v.owns(k)).count() + usize::from(joined.owns(k));
            assert!((1..=2).contains(&doers), "{k}: {doers}");
        }
        // After the others' next read: exactly one each again, and about
        // a third moved, all of them to c.
        let new: Vec<View> = ["a", "b", "c"]
            .iter()
            .map(|m| view(m, &["a", "b", "c"]))
            .collect();
        let moved: u64 = old
            .iter()
            .zip(&new)
            .map(|(o, n)| handoffs(o, n, keys.iter().map(String::as_str)))
            .sum();
        assert!((250..=420).contains(&moved), "{moved}");
        for k in &keys {
            assert_eq!(new.iter().filter(|v| v.owns(k)).count(), 1);
            if !old
                .iter()
                .any(|v| v.owns(k) && new.iter().any(|n| n.me == v.me && n.owns(k)))
            {
                assert!(new[2].owns(k), "{k} moved between members that stayed");
            }
        }
    }

    /// Break-before-make is what a leave is, bounded: the leaver's keys
    /// have no owner until the others see its lease end.
    #[test]
    fn a_leavers_keys_go_to_the_members_that_stay() {
        let before: Vec<View> = ["a", "b", "c"]
            .iter()
            .map(|m| view(m, &["a", "b", "c"]))
            .collect();
        let after: Vec<View> = ["a", "b"].iter().map(|m| view(m, &["a", "b"])).collect();
        for i in 0..1000 {
            let k = format!("t-{i}");
            let had = before.iter().position(|v| v.owns(&k)).unwrap();
            let has = after.iter().position(|v| v.owns(&k)).unwrap();
            if had < 2 {
                assert_eq!(had, has, "{k} moved though its owner stayed");
            }
        }
    }

    #[test]
    fn balance_is_within_ten_percent_at_a_thousand_targets_over_four() {
        let members = ["gw-0", "gw-1", "gw-2", "gw-3"];
        let views: Vec<View> = members.iter().map(|m| view(m, &members)).collect();
        for v in &views {
            let owned = (0..1000).filter(|i| v.owns(&format!("target-{i}"))).count();
            assert!((225..=275).contains(&owned), "{}: {owned}", v.me);
        }
    }

    /// One replica of the churn simulation below, renewing and reading as
    /// `run.rs` does.
    struct Simulated {
        id: String,
        running: bool,
        liveness: Liveness,
        view: View,
        /// `view.owns` of each key, as of the last renewal.
        owns: Vec<bool>,
        next_renewal: Instant,
    }

    /// The engine: each record's token and when it was written.
    type Records = std::collections::BTreeMap<String, (u64, Instant)>;

    /// What one read shows `Liveness`: ages by the engine's clock
    /// (PostgreSQL) or none, judged by token changes (Kubernetes).
    fn read(records: &Records, now: Instant, engine_ages: bool) -> Vec<Seen> {
        records
            .iter()
            .map(|(id, (token, written))| Seen {
                id: id.clone(),
                token: token.to_string(),
                age: engine_ages.then(|| now.saturating_duration_since(*written)),
                admin_url: None,
            })
            .collect()
    }

    fn renew(
        r: &mut Simulated,
        records: &mut Records,
        keys: &[String],
        now: Instant,
        engine_ages: bool,
    ) {
        let joining = !records.contains_key(&r.id);
        let token = records.get(&r.id).map_or(0, |(t, _)| t + 1);
        records.insert(r.id.clone(), (token, now));
        let members = r.liveness.fold(&read(records, now, engine_ages), now);
        // Leftovers deleted, as `run.rs` does.
        for (id, _) in r.liveness.stale(LEASE * 4, now) {
            records.remove(id);
        }
        let timeout = Duration::from_secs(60);
        let duties = if joining {
            duties_at_join(engine_ages, members.len(), 1, timeout)
        } else {
            duties_after(&r.view.duties, members.len(), 1, Duration::ZERO, timeout)
        };
        r.view = r.view.next(members, duties, None);
        r.owns = keys.iter().map(|k| r.view.owns(k)).collect();
    }

    /// 100 membership changes a minute for three minutes, between 2 and
    /// 8 replicas: joins and clean leaves (the record given up), and a
    /// crash (the record left behind) every 20 s. Every key has an owner
    /// among the running replicas again within a lease and a renewal,
    /// and none is done by more than two replicas for longer than a
    /// renewal. (Crashes less than a lease apart can chain: a key whose
    /// two highest-ranked members both crashed waits for the later one's
    /// lease. No lease-based membership can tell a crash sooner.)
    fn churn(engine_ages: bool) {
        const RENEW: Duration = Duration::from_secs(5);
        const STEP: Duration = Duration::from_millis(100);
        let t0 = Instant::now();
        let keys: Vec<String> = (0..200).map(|i| format!("t-{i}")).collect();
        let mut records = Records::new();
        let mut replicas: Vec<Simulated> = Vec::new();
        let mut random: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next_random = move || {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            random
        };
        let join = |replicas: &mut Vec<Simulated>, records: &mut Records, now: Instant| {
            let id = format!("gw-{}", replicas.len());
            let mut r = Simulated {
                view: View::solo(&id),
                liveness: Liveness::new(LEASE, &id),
                id,
                running: true,
                owns: Vec::new(),
                next_renewal: now + RENEW,
            };
            renew(&mut r, records, &keys, now, engine_ages);
            replicas.push(r);
        };
        for _ in 0..3 {
            join(&mut replicas, &mut records, t0);
        }
        let mut unowned_since: Vec<Option<Instant>> = vec![None; keys.len()];
        let mut crowded_since: Vec<Option<Instant>> = vec![None; keys.len()];
        let (mut longest_unowned, mut longest_crowded) = (Duration::ZERO, Duration::ZERO);
        let mut changes = 0;
        let mut now = t0;
        // A minute to settle, then three of churn, then a lease to end.
        let churn_from = t0 + Duration::from_secs(60);
        let churn_until = churn_from + Duration::from_secs(180);
        while now < churn_until + LEASE + RENEW {
            now += STEP;
            let running = replicas.iter().filter(|r| r.running).count();
            // One change every 0.6 s: 100 a minute.
            if now >= churn_from
                && now < churn_until
                && (now - churn_from).as_millis().is_multiple_of(600)
            {
                changes += 1;
                let leave = running >= 8 || (running > 2 && next_random() % 2 == 0);
                if leave {
                    let pick = next_random() as usize % running;
                    let r = replicas.iter_mut().filter(|r| r.running).nth(pick).unwrap();
                    r.running = false;
                    let crash = (now - churn_from).as_millis() % 20_000 < 600;
                    if !crash {
                        records.remove(&r.id);
                    }
                } else {
                    join(&mut replicas, &mut records, now);
                }
            }
            for r in replicas.iter_mut().filter(|r| r.running) {
                if now >= r.next_renewal {
                    r.next_renewal += RENEW;
                    renew(r, &mut records, &keys, now, engine_ages);
                }
            }
            for k in 0..keys.len() {
                let doers = replicas.iter().filter(|r| r.running && r.owns[k]).count();
                for (since, bad, longest) in [
                    (&mut unowned_since[k], doers == 0, &mut longest_unowned),
                    (&mut crowded_since[k], doers > 2, &mut longest_crowded),
                ] {
                    match (bad, *since) {
                        (true, None) => *since = Some(now),
                        (true, Some(from)) => {
                            *longest = (*longest).max(now - from);
                        }
                        (false, _) => *since = None,
                    }
                }
            }
        }
        assert_eq!(changes, 300);
        assert!(
            longest_unowned <= LEASE + RENEW,
            "engine ages {engine_ages}: a key had no owner for {longest_unowned:?}"
        );
        assert!(
            longest_crowded <= RENEW,
            "engine ages {engine_ages}: a key had more than two owners for {longest_crowded:?}"
        );
    }

    #[test]
    fn a_hundred_changes_a_minute_by_the_databases_clock() {
        churn(true);
    }

    #[test]
    fn a_hundred_changes_a_minute_by_lease_changes_seen() {
        churn(false);
    }
}
