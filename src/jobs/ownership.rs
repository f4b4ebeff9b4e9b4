//! This replica's share of the fleet in the open: how many targets it
//! owns (`jmxgate_cluster_owned_targets`) and how many moved to or from
//! it when the members changed (`jmxgate_cluster_handoffs_total`), kept
//! current as the members and the fleet change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::pipeline::Gateway;

/// How often the count follows the fleet when the members do not change
/// (discovery adds and drops targets at any time).
const RECOUNT: Duration = Duration::from_secs(5);

/// Counts while the gateway lives. Needs a Tokio runtime.
pub fn spawn(gateway: &Arc<Gateway>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(gateway);
    let mut views = gateway.cluster().subscribe();
    tokio::spawn(async move {
        // Each target's owner as of the last count.
        let mut owned: HashMap<Arc<str>, bool> = HashMap::new();
        let mut generation = None;
        loop {
            let Some(gateway) = weak.upgrade() else {
                return;
            };
            let view = gateway.cluster().view();
            let fleet = gateway.fleet();
            let moved_members = generation.replace(view.generation) != Some(view.generation);
            let mut handoffs = 0;
            let mut count = 0;
            let mut now: HashMap<Arc<str>, bool> = HashMap::with_capacity(fleet.len());
            for target in fleet.iter() {
                let name = target.health.shared_name();
                let mine = match owned.get(name) {
                    Some(was) if !moved_members => *was,
                    was => {
                        let mine = view.owns(name);
                        if was.is_some_and(|was| *was != mine) {
                            handoffs += 1;
                        }
                        mine
                    }
                };
                count += usize::from(mine);
                now.insert(name.clone(), mine);
            }
            owned = now;
            gateway.metrics.cluster_owned_targets.set(count as i64);
            gateway.metrics.cluster_handoffs.inc_by(handoffs);
            drop((fleet, gateway));
            tokio::select! {
                changed = views.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(RECOUNT) => {}
            }
        }
    })
}
