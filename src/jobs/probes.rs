//! Health probes: the fleet probed while the gateway lives, a job with
//! no request (its results feed every target's health, which routing,
//! `/jolokia/targets`, the console and `/readyz` read).

use std::sync::Arc;

use crate::pipeline::Gateway;

/// Probes the fleet while the gateway lives (not at all with
/// `health.probe_interval` `0s`): the first round right away, as fast
/// as `health.max_probes_in_flight` allows; later rounds one interval
/// apart, each target at a fixed tick of the round set by its name
/// (`health::probe_ticks`), so its probes are one interval apart and
/// no tick has a burst. Which targets a round asks is
/// `TargetHealth::probe_decision` (passive health, stable targets
/// every `health.stable_probe_interval`). A round slowed by the bound
/// on probes in flight starts the next one late rather than early.
/// Each round reads the fleet anew, and the cluster: with `[cluster]`,
/// only the targets this replica owns are probed (`cluster::View::owns`):
/// a change of members seen mid-round has the targets taken over probed
/// at once and those given up skipped. Needs a Tokio runtime.
pub fn spawn(gateway: &Arc<Gateway>) -> Option<tokio::task::JoinHandle<()>> {
    use crate::health::ProbeDecision;
    if gateway.health_config.probe_interval.is_zero() {
        return None;
    }
    let weak = Arc::downgrade(gateway);
    let interval = gateway.health_config.probe_interval;
    let health = gateway.health_config.clone();
    let (tick, ticks) = crate::health::probe_ticks(interval);
    let max_in_flight = gateway.max_probes_in_flight;
    Some(tokio::spawn(async move {
        // Probes in flight, driven by this task rather than a task each.
        let mut probes = futures::stream::FuturesUnordered::new();
        let mut sent = Vec::new();
        let mut owned = crate::cluster::Owned::default();
        let mut previous: Option<Arc<crate::cluster::View>> = None;
        for round_no in 0u64.. {
            let first = round_no == 0;
            let round = tokio::time::Instant::now();
            let Some((fleet, mut view)) = weak.upgrade().map(|g| (g.fleet(), g.cluster.view()))
            else {
                return;
            };
            owned.trim(fleet.len());
            // Members changed since the last round began: what this
            // replica took over is probed at the round's start.
            let before = previous
                .take()
                .filter(|p: &Arc<crate::cluster::View>| p.generation != view.generation);
            let mut targets: Vec<_> = fleet
                .iter()
                .filter(|t| owned.owns(&view, t.health.shared_name()))
                .map(|t| {
                    let taken = before
                        .as_ref()
                        .is_some_and(|b| view.took_over(b, t.health.shared_name()));
                    let at = if first || taken {
                        0
                    } else {
                        t.health.probe_tick(ticks)
                    };
                    (at, first || taken, t.clone())
                })
                .collect();
            drop(fleet);
            let stable_rounds = health.stable_rounds(targets.len());
            targets.sort_unstable_by_key(|(at, _, _)| *at);
            for batch in targets.chunk_by(|a, b| a.0 == b.0) {
                drive_until(&mut probes, round + tick * batch[0].0 as u32).await;
                {
                    let Some(live) = weak.upgrade() else {
                        return;
                    };
                    let latest = live.cluster.view();
                    if latest.generation != view.generation {
                        took_over(&live, &view, &latest, &mut sent);
                        view = latest;
                    }
                    for (_, now, target) in batch {
                        if !owned.owns(&view, target.health.shared_name()) {
                            // Given up since the round began: its new
                            // owner probes it.
                            continue;
                        }
                        let decision = if *now {
                            ProbeDecision::Send
                        } else {
                            target
                                .health
                                .probe_decision(interval, round_no, stable_rounds)
                        };
                        live.metrics.probe_decided(decision);
                        if decision == ProbeDecision::Send {
                            sent.push(target.clone());
                        }
                    }
                }
                for target in sent.drain(..) {
                    while probes.len() >= max_in_flight {
                        futures::StreamExt::next(&mut probes).await;
                    }
                    let Some(gateway) = weak.upgrade() else {
                        return;
                    };
                    probes.push(async move { target.probe(&gateway.metrics).await });
                }
            }
            drive_until(&mut probes, round + interval).await;
            previous = Some(view);
        }
    }))
}

/// Who owns what changed in the middle of a round (a member joined,
/// left or was lost): the targets this replica owns under `latest` and
/// did not under `before` go into `sent`, probed now. Left to their tick
/// in the next round, a lost member's targets would wait up to two
/// intervals beyond its lease.
fn took_over(
    gateway: &Gateway,
    before: &crate::cluster::View,
    latest: &crate::cluster::View,
    sent: &mut Vec<Arc<crate::fleet::Target>>,
) {
    let fleet = gateway.fleet();
    for target in fleet.iter() {
        if latest.took_over(before, target.health.shared_name()) {
            gateway
                .metrics
                .probe_decided(crate::health::ProbeDecision::Send);
            sent.push(target.clone());
        }
    }
}

/// Drives the probes in flight until `deadline`.
async fn drive_until<F: std::future::Future<Output = ()>>(
    probes: &mut futures::stream::FuturesUnordered<F>,
    deadline: tokio::time::Instant,
) {
    let mut sleep = std::pin::pin!(tokio::time::sleep_until(deadline));
    loop {
        tokio::select! {
            _ = &mut sleep => return,
            Some(()) = futures::StreamExt::next(probes), if !probes.is_empty() => {}
        }
    }
}
