//! Joining the cluster and keeping this replica's record renewed: the I/O
//! around `view.rs`. One task per replica renews its record every
//! `renew_interval`, reads everyone's, and publishes the [`View`] that
//! follows; the engine down keeps the last members (and says so), another
//! instance holding this replica's id fences it (no background work).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::kubernetes::Leases;
use super::postgres::Rows;
use super::view::{duties_after, duties_at_join, Duties, Liveness, View};
use super::{Claim, Cluster, ClusterConfig, MembershipKind};
use crate::metrics::Metrics;

enum Engine {
    Kubernetes(Box<Leases>),
    Postgres(Rows),
}

impl Engine {
    async fn claim(&mut self, over: Option<&str>) -> Result<Claim, String> {
        match self {
            Engine::Kubernetes(e) => e.claim(over).await,
            Engine::Postgres(e) => e.claim().await,
        }
    }

    async fn renew(&mut self) -> Result<Option<String>, String> {
        match self {
            Engine::Kubernetes(e) => e.renew().await,
            Engine::Postgres(e) => e.renew().await,
        }
    }

    async fn read(&self) -> Result<Vec<super::view::Seen>, String> {
        match self {
            Engine::Kubernetes(e) => e.read().await,
            Engine::Postgres(e) => e.read().await,
        }
    }

    /// Deletes a leftover record (PostgreSQL's rows judge themselves).
    async fn forget(&self, id: &str, token: &str) -> Result<(), String> {
        match self {
            Engine::Kubernetes(e) => e.forget(id, token).await,
            Engine::Postgres(_) => Ok(()),
        }
    }

    async fn leave(&mut self) -> Result<(), String> {
        match self {
            Engine::Kubernetes(e) => e.leave().await,
            Engine::Postgres(e) => e.leave().await,
        }
    }

    fn epoch(&self) -> Option<i64> {
        match self {
            Engine::Kubernetes(e) => e.epoch(),
            Engine::Postgres(e) => e.epoch(),
        }
    }
}

/// A replica that joined: its renewing task, until [`Started::leave`].
pub struct Started {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Started {
    /// Stops renewing and gives this replica's record up, so the others
    /// take its share at their next read rather than after a lease.
    pub async fn leave(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Joins the cluster of `config` as `cluster`'s replica, then keeps
/// renewing in a task of its own, publishing each view to `cluster`.
/// Errors: the engine unreachable, or the replica id held by another
/// running instance (each said so that a person can act on it).
pub async fn start(
    config: &ClusterConfig,
    cluster: &Cluster,
    metrics: Arc<Metrics>,
) -> Result<Started, String> {
    let me = config.replica().to_string();
    // This process, told apart from another started with the same id.
    let instance = crate::random::hex(8);
    let unreachable = |e: String| format!("cluster: cannot reach {}: {e}", config.describe());
    let mut engine = match config.membership {
        MembershipKind::Kubernetes => Engine::Kubernetes(Box::new(
            Leases::connect(config, &me, &instance)
                .await
                .map_err(unreachable)?,
        )),
        MembershipKind::Postgres => Engine::Postgres(
            Rows::connect(config, &me, &instance)
                .await
                .map_err(unreachable)?,
        ),
    };
    claim(config, &mut engine).await?;
    tracing::info!(
        replica = %me,
        epoch = engine.epoch(),
        "cluster: joined as a member ({})",
        config.describe()
    );
    let mut liveness = Liveness::new(config.lease_duration, &me);
    let first = engine.read().await.map_err(unreachable)?;
    let members = liveness.fold(&first, Instant::now());
    let began = Instant::now();
    let duties = duties_at_join(
        config.membership.knows_ages(),
        members.len(),
        config.wait_for_members,
        config.wait_timeout,
    );
    let mut view = View::solo(&me)
        .of_engine(config.membership.as_str(), engine.epoch())
        .next(members, duties, None);
    announce(&view, None, &metrics);
    cluster.publish(view.clone());
    let (stop, mut stopped) = tokio::sync::oneshot::channel();
    let config = config.clone();
    let cluster = cluster.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(config.renew_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = &mut stopped => break,
            }
            let next = renew_and_read(&config, &mut engine, &mut liveness, &view, began).await;
            announce(&next, Some(&view), &metrics);
            cluster.publish(next.clone());
            view = next;
        }
        match engine.leave().await {
            Ok(()) => tracing::info!("cluster: left; the others take this replica's share"),
            Err(e) => tracing::warn!(
                "cluster: could not give this replica's record up ({e}); the others take its share once its lease ends"
            ),
        }
    });
    Ok(Started { stop, task })
}

/// Claims this replica's record. Held by someone else: waits up to a
/// lease and a renewal to see whether that holder renews (then it is a
/// second live replica with this id, refused) or lapses (taken over).
async fn claim(config: &ClusterConfig, engine: &mut Engine) -> Result<(), String> {
    let me = config.replica();
    let patience = config.lease_duration + config.renew_interval;
    let poll =
        (config.renew_interval / 5).clamp(Duration::from_millis(100), Duration::from_secs(1));
    let mut first_held: Option<(String, Instant)> = None;
    let mut over: Option<String> = None;
    loop {
        let claimed = engine
            .claim(over.as_deref())
            .await
            .map_err(|e| format!("cluster: cannot reach {}: {e}", config.describe()))?;
        let token = match claimed {
            Claim::Joined => return Ok(()),
            // Written at that very moment: read again.
            Claim::Held { token } if token.is_empty() => continue,
            Claim::Held { token } => token,
        };
        match &first_held {
            None => {
                tracing::info!(
                    replica = %me,
                    "cluster: another instance holds replica id {me:?}; waiting up to {} to see whether it is alive",
                    humantime::format_duration(patience)
                );
                first_held = Some((token, Instant::now()));
            }
            Some((seen, _)) if *seen != token => {
                return Err(format!(
                    "cluster: replica id {me:?} is in use: another running replica holds it in {} and renewed it while this one waited; give each replica its own id (cluster.replica_id, audit.replica_id or JMXGATE_REPLICA_ID; the hostname by default)",
                    config.describe()
                ))
            }
            Some((_, since)) if since.elapsed() >= patience * 2 => {
                return Err(format!(
                    "cluster: replica id {me:?} stays held in {} although its holder has not renewed for {}; is another instance's clock or the engine wrong?",
                    config.describe(),
                    humantime::format_duration(since.elapsed())
                ))
            }
            // Unchanged for a whole lease by this clock: a leftover.
            Some((seen, since)) if since.elapsed() >= config.lease_duration => {
                over = Some(seen.clone());
            }
            Some(_) => {}
        }
        tokio::time::sleep(poll).await;
    }
}

/// One renewal: this replica's record renewed, everyone's read, and the
/// view that follows (the last members kept when the engine fails).
async fn renew_and_read(
    config: &ClusterConfig,
    engine: &mut Engine,
    liveness: &mut Liveness,
    last: &View,
    began: Instant,
) -> View {
    let mut trouble = None;
    let mut duties = last.duties.clone();
    match engine.renew().await {
        Ok(None) => {}
        Ok(Some(why)) => {
            if !matches!(duties, Duties::Fenced { .. }) {
                tracing::error!(
                    "cluster: fenced, no more background work here: {why} (two replicas with one replica id?)"
                );
            }
            duties = Duties::Fenced { why };
        }
        Err(e) => trouble = Some(format!("cannot renew this replica's record: {e}")),
    }
    let members = match engine.read().await {
        Ok(seen) => {
            let now = Instant::now();
            for (id, token) in liveness.stale(config.lease_duration * 4, now) {
                if id != &*last.me {
                    if let Err(e) = engine.forget(id, token).await {
                        tracing::debug!("cluster: leftover record of {id}: {e}");
                    }
                }
            }
            liveness.fold(&seen, now)
        }
        Err(e) => {
            trouble.get_or_insert(format!("cannot read the members: {e}"));
            last.members.to_vec()
        }
    };
    let duties = duties_after(
        &duties,
        members.len(),
        config.wait_for_members,
        began.elapsed(),
        config.wait_timeout,
    );
    let mut next = last.next(members, duties, trouble);
    next.epoch = engine.epoch();
    next
}

/// Logs what changed and sets the cluster's gauges.
fn announce(view: &View, last: Option<&View>, metrics: &Metrics) {
    metrics.cluster_members.set(view.members.len() as i64);
    metrics
        .cluster_engine_up
        .set(i64::from(view.trouble.is_none()));
    let engine = view.engine.unwrap_or("none");
    match (last.and_then(|l| l.trouble.as_ref()), &view.trouble) {
        (None, Some(why)) => tracing::warn!(
            engine,
            "cluster: {why}; keeping the last membership seen ({} members)",
            view.members.len()
        ),
        (Some(_), None) => tracing::info!(engine, "cluster: the membership engine answers again"),
        _ => {}
    }
    let ids = view.ids().join(", ");
    if last.is_none_or(|l| l.ids() != view.ids()) {
        tracing::info!(engine, members = %ids, "cluster: {} members", view.members.len());
    }
    if last.is_none_or(|l| l.duties != view.duties) {
        match &view.duties {
            Duties::Active => tracing::info!("cluster: doing this replica's share of the duties"),
            Duties::Waiting { members, wanted } if members >= wanted => tracing::info!(
                "cluster: waiting one renewal to see which members renew before any background work ({members} seen)"
            ),
            Duties::Waiting { members, wanted } => tracing::info!(
                "cluster: waiting for {wanted} members before any background work ({members} seen)"
            ),
            Duties::Fenced { .. } => {}
        }
    }
}
