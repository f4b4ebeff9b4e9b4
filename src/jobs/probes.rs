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
/// only the targets this replica owns are probed (`cluster::View::owns`),
/// so a change of members moves probes at the next round, within one
/// interval. Needs a Tokio runtime.
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
        for round_no in 0u64.. {
            let first = round_no == 0;
            let round = tokio::time::Instant::now();
            let Some((fleet, view)) = weak.upgrade().map(|g| (g.fleet(), g.cluster.view())) else {
                return;
            };
            owned.trim(fleet.len());
            let mut targets: Vec<_> = fleet
                .iter()
                .filter(|t| owned.owns(&view, t.health.shared_name()))
                .map(|t| {
                    (
                        if first { 0 } else { t.health.probe_tick(ticks) },
                        t.clone(),
                    )
                })
                .collect();
            drop(fleet);
            let stable_rounds = health.stable_rounds(targets.len());
            targets.sort_unstable_by_key(|(at, _)| *at);
            for batch in targets.chunk_by(|a, b| a.0 == b.0) {
                drive_until(&mut probes, round + tick * batch[0].0 as u32).await;
                {
                    let Some(live) = weak.upgrade() else {
                        return;
                    };
                    for (_, target) in batch {
                        let decision = if first {
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
        }
    }))
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
