//! The I/O edge: list and watch Pods (and Namespaces), fold what is seen
//! into a [`PodSet`], hand over what changed.

use super::*;

/// What the watch of one entry saw: Pod events (with the namespace of
/// the watch, `None` for all), Namespace events, or a failure.
enum Seen {
    Pods(Option<String>, Box<watcher::Event<Pod>>),
    Namespaces(Box<watcher::Event<Namespace>>),
    Failed(retry::Failure),
}

/// Each Pod's target (shared with what was handed over: one copy per
/// Pod) or why it has none, by `namespace/name`.
type Judged = HashMap<String, Result<std::sync::Arc<TargetConfig>, String>>;

/// Watches one entry's Pods and sends to `changes` the targets that
/// changed (the first time: all of them), [`DEBOUNCE`] after the first
/// change of a burst (the rest of the burst goes with it), as
/// [`Change::Apply`](crate::fleet::Change::Apply): one source of the fleet.
/// A send waits while the one folding the fleet's sources is busy. A
/// watch that keeps failing (a namespace the gateway may not read) holds
/// back no other watch's Pods. While the API server can't be reached the
/// last set stays; each watch's failure is logged once (a warning) and so
/// is its recovery (info), and `changes` hears
/// [`Change::Up`](crate::fleet::Change::Up)`(false)` / `(true)` when some
/// watch starts failing / when none fails any more. Pods refused for what
/// they say are counted by `on_refused`.
///
/// Runs until `changes` is closed, or the task is dropped or aborted.
pub async fn watch(
    config: KubernetesDiscovery,
    changes: tokio::sync::mpsc::Sender<crate::fleet::Change>,
    on_refused: impl Fn(u64) + Send + 'static,
) {
    let source = describe(&config);
    let mut up: Option<bool> = None;
    let mut failing: Option<String> = None;
    let client = loop {
        match client(&config).await {
            Ok(c) => break c,
            Err(why) => {
                if failing.as_deref() != Some(why.as_str()) {
                    tracing::warn!(source = %source, "Kubernetes discovery cannot start, retrying in 5s: {why}");
                }
                if up != Some(false) {
                    if changes.send(crate::fleet::Change::Up(false)).await.is_err() {
                        return;
                    }
                    up = Some(false);
                }
                failing = Some(why);
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    };
    let (streams, what) = watches(&config, &client);
    let mut events = futures::stream::select_all(streams);

    let mut state = PodSet::new(&config);
    // Since when a change waits to be handed over: every change within
    // DEBOUNCE of the first goes over with it (a steady stream of events
    // delays nothing by more than that).
    let mut dirty_since: Option<tokio::time::Instant> = None;
    // Each failing watch: the failure, and when it was last reported. The
    // watcher retries with a back-off of at most 30 s and reports each
    // failed try; a watch that resumes quietly (nothing changed while the
    // API server was away) sends no event, so one without a failure for
    // `RECOVERED_AFTER` counts as working again.
    let mut watch_failing: HashMap<usize, (retry::Failure, tokio::time::Instant)> = HashMap::new();
    loop {
        if dirty_since.is_some_and(|t| t.elapsed() >= DEBOUNCE) {
            dirty_since = None;
            if let Some(change) = state.take_change() {
                if let crate::fleet::Change::Apply { upserts, removed } = &change {
                    tracing::debug!(source = %source, changed = upserts.len(), removed = removed.len(), "Kubernetes discovery: targets changed");
                }
                if changes.send(change).await.is_err() {
                    return;
                }
            }
        }
        let wait = if let Some(t) = dirty_since {
            Some(DEBOUNCE.saturating_sub(t.elapsed()))
        } else if !watch_failing.is_empty() {
            Some(Duration::from_secs(5))
        } else {
            None
        };
        let next = match wait {
            Some(wait) => tokio::time::timeout(wait, events.next()).await.ok(),
            None => Some(events.next().await),
        };
        let now = tokio::time::Instant::now();
        watch_failing.retain(|n, (failure, last)| {
            // A refusal is retried minutes apart: quiet for a while
            // proves nothing; its list succeeding does (below).
            let failing = failure.refused || now.duration_since(*last) < RECOVERED_AFTER;
            if !failing {
                tracing::info!(source = %source, "Kubernetes discovery: watching {} works again", what[*n]);
            }
            failing
        });
        let seen = match next {
            // Nothing for `wait`: the top of the loop hands a change over.
            None => None,
            Some(None) => return,
            Some(Some(item)) => Some(item),
        };
        if let Some((n, seen)) = &seen {
            match seen {
                Seen::Failed(failure) => {
                    if watch_failing.get(n).map(|(f, _)| f) != Some(failure) {
                        tracing::warn!(
                            source = %source,
                            "Kubernetes discovery: {}: {}; keeping the last known targets",
                            what[*n],
                            failure.why
                        );
                    }
                    watch_failing.insert(*n, (failure.clone(), now));
                }
                Seen::Pods(_, event) if !retry::proves_working(event) => {}
                Seen::Namespaces(event) if !retry::proves_working(event) => {}
                _ => {
                    if watch_failing.remove(n).is_some() {
                        tracing::info!(source = %source, "Kubernetes discovery: watching {} works again", what[*n]);
                    }
                }
            }
        }
        // Up while no watch fails.
        let now_up = watch_failing.is_empty();
        if up != Some(now_up) {
            if changes
                .send(crate::fleet::Change::Up(now_up))
                .await
                .is_err()
            {
                return;
            }
            up = Some(now_up);
        }
        let Some((_, seen)) = seen else { continue };
        let refused = state.refused;
        let changed = match seen {
            Seen::Failed(..) => false,
            Seen::Pods(scope, event) => state.pods_event(&config, scope, *event),
            Seen::Namespaces(event) => state.namespaces_event(*event),
        };
        if state.refused > refused {
            on_refused(state.refused - refused);
        }
        if changed && dirty_since.is_none() {
            dirty_since = Some(now);
        }
    }
}

/// One item of the entry's watches, with the watch's number.
type Watches = Vec<futures::stream::BoxStream<'static, (usize, Seen)>>;

/// The entry's watches: Pods in each listed namespace (or in all), and
/// Namespaces with `namespace_selector`. Each watch's items come with its
/// number, so each one's failure is told apart; the second value names
/// each for log lines.
fn watches(config: &KubernetesDiscovery, client: &kube::Client) -> (Watches, Vec<String>) {
    let mut pod_config = watcher::Config::default();
    if let Some(sel) = &config.pod_selector {
        pod_config = pod_config.labels(sel);
    }
    let mut streams: Watches = Vec::new();
    let mut what: Vec<String> = Vec::new();
    let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    for scope in scopes {
        let api: kube::Api<Pod> = match &scope {
            None => kube::Api::all(client.clone()),
            Some(ns) => kube::Api::namespaced(client.clone(), ns),
        };
        let n = what.len();
        what.push(match &scope {
            None => "pods".into(),
            Some(ns) => format!("pods in {ns}"),
        });
        streams.push(
            retried(watcher(api, pod_config.clone()))
                .map(move |r| match r {
                    Ok(e) => (n, Seen::Pods(scope.clone(), Box::new(e))),
                    Err(e) => (n, Seen::Failed(retry::failure(&e))),
                })
                .boxed(),
        );
    }
    if let Some(sel) = &config.namespace_selector {
        let api: kube::Api<Namespace> = kube::Api::all(client.clone());
        let n = what.len();
        what.push("namespaces".into());
        streams.push(
            retried(watcher(api, watcher::Config::default().labels(sel)))
                .map(move |r| match r {
                    Ok(e) => (n, Seen::Namespaces(Box::new(e))),
                    Err(e) => (n, Seen::Failed(retry::failure(&e))),
                })
                .boxed(),
        );
    }
    (streams, what)
}

/// A watch retried by [`retry::WatchBackoff`], which sees each item
/// first through its [`retry::WatchHealth`].
fn retried<K: Send + 'static>(
    stream: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) -> impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static {
    let health = std::sync::Arc::new(retry::WatchHealth::default());
    let seen = health.clone();
    stream
        .inspect(move |item| seen.saw(item))
        .backoff(retry::WatchBackoff::new(health))
}

/// What the watches of one entry have seen, folded: each Pod's target or
/// why it has none, and the namespaces `namespace_selector` picks. Pure
/// (no I/O), so re-lists and deletes are unit-tested.
#[derive(Default)]
pub struct PodSet {
    /// By `namespace/name`.
    pods: Judged,
    /// The Pods of a list under way, per watch (its namespace, `None` for
    /// all): they replace that watch's Pods only when the list is complete.
    pending: HashMap<Option<String>, Judged>,
    /// With `namespace_selector`: the namespaces it picks.
    selected_ns: Option<BTreeSet<String>>,
    pending_ns: Option<BTreeSet<String>>,
    /// What [`take_change`](Self::take_change) handed over, by Pod.
    handed: HashMap<String, std::sync::Arc<TargetConfig>>,
    /// Pods whose target may differ from the one handed over.
    dirty: HashSet<String>,
    /// Every Pod may (a re-list, a namespace picked or dropped).
    all_dirty: bool,
    /// Pods refused for what they say (see `is_suspicious`), each counted
    /// when its reason is new.
    pub refused: u64,
    /// The Pods' agent settings and label strings, one copy for all the
    /// Pods that have them equal rather than one each.
    shared: Shared,
}

impl PodSet {
    /// A set for an entry (with a namespace filter when it has a
    /// `namespace_selector`).
    pub fn new(config: &KubernetesDiscovery) -> PodSet {
        PodSet {
            selected_ns: config.namespace_selector.as_ref().map(|_| BTreeSet::new()),
            ..PodSet::default()
        }
    }

    /// Folds in a Pod event of the watch of `scope` (a namespace, `None`
    /// for all); true when the targets may have changed.
    pub fn pods_event(
        &mut self,
        config: &KubernetesDiscovery,
        scope: Option<String>,
        event: watcher::Event<Pod>,
    ) -> bool {
        match event {
            watcher::Event::Init => {
                self.pending.insert(scope, HashMap::new());
                false
            }
            watcher::Event::InitApply(pod) => {
                let (key, result, odd) = judge(config, &pod, &self.pods, &mut self.shared);
                self.refused += u64::from(odd);
                self.pending.entry(scope).or_default().insert(key, result);
                false
            }
            watcher::Event::InitDone => {
                let fresh = self.pending.remove(&scope).unwrap_or_default();
                self.all_dirty = true;
                match &scope {
                    None => self.pods = fresh,
                    Some(ns) => {
                        let prefix = format!("{ns}/");
                        self.pods.retain(|k, _| !k.starts_with(&prefix));
                        self.pods.extend(fresh);
                    }
                }
                true
            }
            watcher::Event::Apply(pod) => {
                let (key, result, odd) = judge(config, &pod, &self.pods, &mut self.shared);
                self.refused += u64::from(odd);
                self.dirty.insert(key.clone());
                self.pods.insert(key, result);
                true
            }
            watcher::Event::Delete(pod) => {
                let key = pod_key(&pod);
                tracing::info!(pod = %key, "Kubernetes discovery: pod deleted");
                let known = self.pods.remove(&key).is_some();
                if known {
                    self.dirty.insert(key);
                }
                known
            }
        }
    }

    /// Folds in a Namespace event (of the `namespace_selector` watch).
    pub fn namespaces_event(&mut self, event: watcher::Event<Namespace>) -> bool {
        let selected = self.selected_ns.get_or_insert_with(BTreeSet::new);
        match event {
            watcher::Event::Init => {
                self.pending_ns = Some(BTreeSet::new());
                false
            }
            watcher::Event::InitApply(ns) => {
                if let Some(name) = ns.metadata.name {
                    self.pending_ns
                        .get_or_insert_with(BTreeSet::new)
                        .insert(name);
                }
                false
            }
            watcher::Event::InitDone => {
                *selected = self.pending_ns.take().unwrap_or_default();
                self.all_dirty = true;
                true
            }
            watcher::Event::Apply(ns) => {
                let changed = ns.metadata.name.is_some_and(|n| selected.insert(n));
                self.all_dirty |= changed;
                changed
            }
            watcher::Event::Delete(ns) => {
                let changed = ns.metadata.name.is_some_and(|n| selected.remove(&n));
                self.all_dirty |= changed;
                changed
            }
        }
    }

    /// The targets added, changed or gone since the last call (the first
    /// time: all there are), or `None` when nothing changed. Only the
    /// Pods events named are looked at, unless a re-list or a namespace
    /// change may have changed any.
    pub fn take_change(&mut self) -> Option<crate::fleet::Change> {
        let keys: Vec<String> = if std::mem::take(&mut self.all_dirty) {
            self.dirty.clear();
            self.pods
                .keys()
                .chain(self.handed.keys())
                .cloned()
                .collect()
        } else {
            self.dirty.drain().collect()
        };
        let mut upserts = Vec::new();
        let mut removed = Vec::new();
        let mut keys = keys;
        keys.sort();
        keys.dedup();
        for key in keys {
            let now = self
                .pods
                .get(&key)
                .and_then(|r| r.as_ref().ok())
                .filter(|_| self.namespace_selected(&key))
                .cloned();
            match (now, self.handed.get_mut(&key)) {
                (Some(now), Some(before)) if *now == **before => {
                    // The same target from a new judgement: keep one copy.
                    *before = now;
                }
                (Some(now), _) => {
                    upserts.push(now.clone());
                    self.handed.insert(key, now);
                }
                (None, Some(_)) => {
                    let before = self.handed.remove(&key).expect("handed over");
                    removed.push(before.name.clone());
                }
                (None, None) => {}
            }
        }
        (!upserts.is_empty() || !removed.is_empty())
            .then_some(crate::fleet::Change::Apply { upserts, removed })
    }

    /// Whether `namespace/name` is in a namespace the entry picks.
    fn namespace_selected(&self, key: &str) -> bool {
        self.selected_ns
            .as_ref()
            .is_none_or(|set| key.split_once('/').is_some_and(|(ns, _)| set.contains(ns)))
    }

    /// The targets of the Pods with one (in the selected namespaces), by
    /// name, each name once.
    pub fn targets(&self) -> Vec<TargetConfig> {
        current(&self.pods, self.selected_ns.as_ref())
    }
}

/// `namespace/name` of a Pod, printable.
fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        printable(pod.metadata.namespace.as_deref().unwrap_or_default()),
        printable(pod.metadata.name.as_deref().unwrap_or_default())
    )
}

/// `namespace/name` of a Pod and its target or why not. A skipped Pod is
/// logged when its reason is new (not at every list): at warn when the Pod
/// says something odd (an annotation, its IP, its name), else at debug
/// (most Pods of a cluster are no agents, or not ready yet). The third
/// value: the Pod was refused for something odd, newly.
fn judge(
    config: &KubernetesDiscovery,
    pod: &Pod,
    known: &Judged,
    shared: &mut Shared,
) -> (String, Result<std::sync::Arc<TargetConfig>, String>, bool) {
    let key = pod_key(pod);
    let result = config.pod_target(pod).map(|mut target| {
        shared.settings.share(&mut target.agent);
        target.labels = shared.labels.intern(&target.labels);
        std::sync::Arc::new(target)
    });
    let mut odd = false;
    if let Err(why) = &result {
        let before = known.get(&key).and_then(|r| r.as_ref().err());
        if before != Some(why) {
            if is_suspicious(why) {
                tracing::warn!(pod = %key, "Kubernetes discovery: pod skipped: {why}");
                odd = true;
            } else {
                tracing::debug!(pod = %key, "Kubernetes discovery: pod skipped: {why}");
            }
        }
    }
    (key, result, odd)
}

/// What the Pods' targets share (see [`PodSet::shared`]).
#[derive(Debug, Default)]
struct Shared {
    settings: crate::agent_settings::SettingsPool,
    labels: crate::labels::LabelPool,
}

/// A reason that points at odd input rather than an ordinary state.
pub(super) fn is_suspicious(why: &str) -> bool {
    why.starts_with("annotation ")
        || why.starts_with("status.podIP")
        || why.starts_with("name ")
        || why.starts_with("namespace ")
        || why.starts_with("the agent URL")
}

/// The targets of the Pods with one, in selected namespaces, by name.
fn current(pods: &Judged, namespaces: Option<&BTreeSet<String>>) -> Vec<TargetConfig> {
    let mut targets: Vec<TargetConfig> = pods
        .iter()
        .filter(|(k, _)| {
            namespaces.is_none_or(|set| k.split_once('/').is_some_and(|(ns, _)| set.contains(ns)))
        })
        .filter_map(|(_, r)| r.as_ref().ok().map(|t| TargetConfig::clone(t)))
        .collect();
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    targets.dedup_by(|a, b| a.name == b.name);
    targets
}
