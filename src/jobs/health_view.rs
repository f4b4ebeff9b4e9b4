//! One health view across replicas (`health/shared.rs`): this replica
//! reads every other live member's report of the targets it owns from its
//! admin listener (`GET <advertise_url>/cluster/health`), only what changed
//! since the last read, and adopts it, about twice per probe interval. A
//! job with no request: what it reads is the members' own, at the
//! addresses they wrote into the membership engine, never a caller's.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::health::shared::Report;
use crate::pipeline::Gateway;

/// Where a read of one member got to: its book and count.
#[derive(Debug, Clone, Default)]
struct Cursor {
    incarnation: Option<String>,
    upto: u64,
}

/// How often the others' reports are read: twice per probe interval, so
/// an owner's result is everywhere within one; never more than 5 times a
/// second, never less than every 5 s.
pub fn read_every(probe_interval: Duration) -> Duration {
    (probe_interval / 2).clamp(Duration::from_millis(200), Duration::from_secs(5))
}

/// The most a report may hold: about 1 KiB per target of the fleet, and
/// at least 4 MiB (a member answering more is not believed).
fn max_report_bytes(fleet: usize) -> usize {
    fleet.saturating_mul(1024).max(4 << 20)
}

/// Reads the others' health while the gateway lives, with `[cluster]`
/// and probes on; `None` otherwise. Needs a Tokio runtime.
pub fn spawn(gateway: &Arc<Gateway>) -> Option<tokio::task::JoinHandle<()>> {
    let interval = gateway.health_config.probe_interval;
    if interval.is_zero() || gateway.cluster.view().engine.is_none() {
        return None;
    }
    let every = read_every(interval);
    let http = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(every.max(Duration::from_secs(1)))
        .timeout(every.max(Duration::from_secs(2)))
        .build()
        .ok()?;
    let weak = Arc::downgrade(gateway);
    Some(tokio::spawn(async move {
        let mut cursors: HashMap<String, Cursor> = HashMap::new();
        let mut failing: HashSet<String> = HashSet::new();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(gateway) = weak.upgrade() else {
                return;
            };
            let view = gateway.cluster.view();
            let peers: Vec<(String, Arc<str>)> = view
                .members
                .iter()
                .filter(|m| *m.id != *view.me)
                .filter_map(|m| Some((m.id.clone(), m.admin_url.clone()?)))
                .collect();
            cursors.retain(|id, _| peers.iter().any(|(p, _)| p == id));
            failing.retain(|id| peers.iter().any(|(p, _)| p == id));
            let limit = max_report_bytes(gateway.fleet().len());
            let reads = peers.iter().map(|(id, url)| {
                let cursor = cursors.get(id).cloned().unwrap_or_default();
                let http = &http;
                async move { (id, read(http, url, &cursor, limit).await) }
            });
            for (id, outcome) in futures::future::join_all(reads).await {
                let outcome = match outcome {
                    Ok(report) => {
                        let next = Cursor {
                            incarnation: Some(report.incarnation.clone()),
                            upto: report.upto,
                        };
                        adopt(&gateway, &view, id, report).await;
                        cursors.insert(id.clone(), next);
                        if failing.remove(id) {
                            tracing::info!(
                                member = %id,
                                "cluster: reading the member's health probes works again"
                            );
                        }
                        "ok"
                    }
                    Err(why) => {
                        if failing.insert(id.clone()) {
                            tracing::warn!(
                                member = %id,
                                "cluster: cannot read the member's health probes ({why}); its targets keep the health last read (logged again once it works)"
                            );
                        }
                        "failed"
                    }
                };
                gateway
                    .metrics
                    .cluster_health_reads
                    .get_or_create(&crate::metrics::OutcomeLabel { outcome })
                    .inc();
            }
        }
    }))
}

/// One read of the member at `url`, at most `limit` bytes of answer.
async fn read(
    http: &reqwest::Client,
    url: &str,
    cursor: &Cursor,
    limit: usize,
) -> Result<Report, String> {
    let at = format!("{}/cluster/health", url.trim_end_matches('/'));
    let mut asked = url::Url::parse(&at).map_err(|e| format!("{at}: {e}"))?;
    asked
        .query_pairs_mut()
        .append_pair("since", &cursor.upto.to_string());
    if let Some(incarnation) = &cursor.incarnation {
        asked
            .query_pairs_mut()
            .append_pair("incarnation", incarnation);
    }
    let mut answer = http.get(asked).send().await.map_err(|e| failed(&at, e))?;
    if !answer.status().is_success() {
        return Err(format!("{at} answered {}", answer.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(|e| failed(&at, e))? {
        if body.len() + chunk.len() > limit {
            return Err(format!("{at} answered more than {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("{at} answered no health report: {e}"))
}

/// A read that got no answer, said as an operator can act on it.
fn failed(at: &str, e: reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "no answer in time"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "no answer"
    };
    let cause = crate::client::innermost_cause(&e.without_url());
    format!("{at}: {kind}: {cause}")
}

/// Adopts `owner`'s report for the targets it owns by `view`, off the
/// serving loop (a report after a restart holds the member's whole
/// share), and sets their `jmxgate_agent_up`.
async fn adopt(
    gateway: &Arc<Gateway>,
    view: &Arc<crate::cluster::View>,
    owner: &str,
    report: Report,
) {
    if report.targets.is_empty() {
        return;
    }
    let (gateway, view, owner) = (gateway.clone(), view.clone(), owner.to_string());
    let _ = tokio::task::spawn_blocking(move || {
        let adopted = gateway.health.adopt(&owner, &report, |name| {
            view.owner(name) == Some(owner.as_str())
        });
        for (health, up) in adopted {
            gateway.metrics.probed(&health, up);
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_come_twice_per_probe_interval_within_bounds() {
        assert_eq!(read_every(Duration::from_secs(10)), Duration::from_secs(5));
        assert_eq!(
            read_every(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
        assert_eq!(
            read_every(Duration::from_millis(100)),
            Duration::from_millis(200)
        );
        assert_eq!(read_every(Duration::from_secs(60)), Duration::from_secs(5));
        assert_eq!(max_report_bytes(10), 4 << 20);
        assert_eq!(max_report_bytes(100_000), 100_000 * 1024);
    }
}
