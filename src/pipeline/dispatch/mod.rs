//! Step 6, dispatch: items bound for the same agent travel together as one
//! bulk POST; agents are called concurrently, each under its own deadline,
//! so one slow or dead agent delays nobody else. Items whose authorization
//! needs the agent's help (patterns, reads of all attributes) run their own
//! short exchanges in [`guarded`]; list answers come through the shared
//! [`list_cache`]; list and search answers are filtered here.

mod guarded;
pub mod list_cache;
pub use guarded::Outcome;

use std::future::Future;
use std::sync::Arc;

use futures::future::join_all;
use futures::stream::{BoxStream, FuturesUnordered};
use futures::StreamExt as _;
use smallvec::SmallVec;

use crate::client::ClientError;
use crate::fleet::Target;
use crate::metrics::Metrics;
use crate::protocol::{Command, ProtocolError, Request, Response};
use crate::secret::Secret;

use super::authorize::{filter, rbac, Grant, Plan};
use list_cache::ListCache;

/// One item on its way to an agent.
#[derive(Debug)]
pub struct Job {
    pub index: usize,
    pub target: Arc<Target>,
    /// Shared by every target of a fan-out: one request, not one copy
    /// per target.
    pub request: Arc<Request>,
    pub plan: Plan,
    pub grant: Grant,
    /// The client's own target credentials, when the target allows
    /// pass-through; else the configured ones are used.
    pub credentials: Option<(String, Secret)>,
}

impl Job {
    /// A job with no policy to apply (tests, open gateways).
    pub fn open(index: usize, target: Arc<Target>, request: Request) -> Job {
        Job {
            index,
            target,
            request: Arc::new(request),
            plan: Plan::Forward,
            grant: Grant::open(),
            credentials: None,
        }
    }
}

/// Items for one agent, in the client's order.
#[derive(Debug)]
pub struct Group {
    pub target: Arc<Target>,
    /// Mostly one (a fan-out's), held inline.
    pub items: SmallVec<[GroupItem; 1]>,
    pub credentials: Option<(String, Secret)>,
}

/// One item of a group: where its answer goes, what is sent and how the
/// answer is filtered.
#[derive(Debug)]
pub struct GroupItem {
    pub index: usize,
    pub request: Arc<Request>,
    pub filter: AnswerFilter,
}

impl std::borrow::Borrow<Request> for GroupItem {
    fn borrow(&self) -> &Request {
        &self.request
    }
}

/// What the caller may see of an answer.
#[derive(Debug)]
pub struct AnswerFilter {
    pub plan: Plan,
    pub grant: Grant,
    /// A list of domains was asked one level deeper to be filtered; cut
    /// it back ([`filter::to_domains`]).
    pub to_domains: bool,
}

/// Adjusts what is sent so the answer can be filtered, and says how.
fn prepare(mut job: Job) -> (Job, AnswerFilter) {
    let to_domains = job.plan == Plan::FilterList
        && !job.grant.is_open()
        && matches!(&job.request.command, Command::List(l)
            if filter::needs_mbean_level(l.path.as_deref(), job.request.params.get("maxDepth")));
    if to_domains {
        Arc::make_mut(&mut job.request).params.set("maxDepth", "2");
    }
    let answer_filter = AnswerFilter {
        plan: job.plan,
        grant: job.grant.clone(),
        to_domains,
    };
    (job, answer_filter)
}

/// Jobs by how they are sent.
#[derive(Default)]
struct Split {
    rbac_queries: Vec<Job>,
    /// Expanded reads and pattern checks (`guarded.rs`).
    guarded: Vec<Job>,
    /// Lists answered through the list cache.
    lists: Vec<Job>,
    /// Sent as they are, grouped by target.
    direct: Vec<Job>,
}

/// Splits jobs in one pass. When all go straight to their agents (a
/// fan-out's usual case) the vector is kept as it is: at 100,000 targets,
/// copies made while splitting were the largest single allocation.
fn split(jobs: Vec<Job>, with_list_cache: bool) -> Split {
    let list = |j: &Job| with_list_cache && matches!(j.request.command, Command::List(_));
    let direct =
        |j: &Job| !matches!(j.plan, Plan::Rbac | Plan::ExpandRead | Plan::CheckPattern) && !list(j);
    if jobs.iter().all(direct) {
        return Split {
            direct: jobs,
            ..Split::default()
        };
    }
    let mut out = Split::default();
    for job in jobs {
        match job.plan {
            Plan::Rbac => out.rbac_queries.push(job),
            Plan::ExpandRead | Plan::CheckPattern => out.guarded.push(job),
            _ if list(&job) => out.lists.push(job),
            _ => out.direct.push(job),
        }
    }
    out
}

/// Groups jobs by target, keeping first-seen target order and item order.
/// Found through a map by target, so a fan-out to 100,000 targets is not
/// 100,000 scans of the groups so far, and with no allocation per target
/// beyond its group.
pub fn group_by_target(jobs: Vec<Job>) -> Vec<Group> {
    // At most a group per job: sized once, not grown by doubling.
    let mut groups: Vec<Group> = Vec::with_capacity(jobs.len());
    // A target's first group; its groups with other pass-through
    // credentials (rare) follow through `next_of_target`.
    let mut first_of_target: std::collections::HashMap<*const Target, usize> =
        std::collections::HashMap::with_capacity(jobs.len());
    let mut next_of_target: Vec<Option<usize>> = Vec::new();
    for job in jobs {
        let (job, filter) = prepare(job);
        let first = first_of_target.get(&Arc::as_ptr(&job.target)).copied();
        let mut at = first;
        let mut last = None;
        while let Some(i) = at {
            if groups[i].credentials == job.credentials {
                break;
            }
            last = Some(i);
            at = next_of_target.get(i).copied().flatten();
        }
        let item = GroupItem {
            index: job.index,
            request: job.request,
            filter,
        };
        match at {
            Some(i) => groups[i].items.push(item),
            None => {
                let new = groups.len();
                match last {
                    Some(prev) => {
                        next_of_target.resize(groups.len() + 1, None);
                        next_of_target[prev] = Some(new);
                    }
                    None => {
                        first_of_target.insert(Arc::as_ptr(&job.target), new);
                    }
                }
                groups.push(Group {
                    target: job.target,
                    items: smallvec::smallvec![item],
                    credentials: job.credentials,
                });
            }
        }
    }
    groups
}

/// Sends every group and yields `(index, answer)` pairs as the agents
/// answer, so a caller can fold them in as they come (a reduced fan-out
/// keeps no answers); a failed exchange becomes an error answer for each
/// item of its group. With a list cache, list items are answered through
/// it.
///
/// At most `max_exchanges` agent exchanges of this request are under way
/// at a time; the rest start as those end. An exchange's deadline starts
/// when it does, so a fan-out to more targets than that waits its turn
/// instead of timing out in a queue, and only that many exchanges' state
/// is held at once.
pub fn dispatch<'a>(
    jobs: Vec<Job>,
    metrics: &'a Metrics,
    list_cache: Option<&'a ListCache>,
    max_exchanges: usize,
) -> BoxStream<'a, (usize, Outcome)> {
    let Split {
        rbac_queries,
        guarded: guarded_jobs,
        lists,
        direct,
    } = split(jobs, list_cache.is_some());
    // Hawtio's RBAC queries are answered here, from the item's grant.
    let rbac_answers: Vec<(usize, Outcome)> = rbac_queries
        .iter()
        .map(|job| (job.index, Outcome::Answer(rbac_answer(job))))
        .collect();
    let groups = group_by_target(direct)
        .into_iter()
        .map(move |group| async move {
            let target = &group.target;
            let credentials = group.credentials.as_ref();
            let answers = exchange(target, &group.items, |items| {
                measured(metrics, target, target.client.bulk_as(items, credentials))
            })
            .await;
            group
                .items
                .iter()
                .zip(answers)
                .map(|(item, answer)| {
                    let answer = filtered(answer, &item.request, &item.filter);
                    (item.index, Outcome::Answer(answer))
                })
                .collect::<SmallVec<[_; 1]>>()
        });
    let guarded_calls: FuturesUnordered<_> =
        guarded_jobs
            .into_iter()
            .map(|job| async move {
                smallvec::smallvec![(job.index, guarded::run(&job, metrics).await)]
            })
            .collect();
    let cached_lists: FuturesUnordered<_> = lists
        .into_iter()
        .map(|job| async move {
            let (job, how) = prepare(job);
            let cache = list_cache.expect("lists are split off only with a cache");
            let answer = cache
                .answer(&job.target, &job.request, job.credentials.as_ref(), metrics)
                .await;
            let answer = filtered(answer, &job.request, &how);
            smallvec::smallvec![(job.index, Outcome::Answer(answer))]
        })
        .collect();
    let groups = futures::stream::iter(groups).buffer_unordered(max_exchanges.max(1));
    futures::stream::select_all([
        groups.boxed(),
        guarded_calls.boxed(),
        cached_lists.boxed(),
        futures::stream::once(async move { SmallVec::from_vec(rbac_answers) }).boxed(),
    ])
    .flat_map(futures::stream::iter)
    .boxed()
}

/// A `canInvoke` on the gateway's ACL MBean, for the job's grant.
fn rbac_answer(job: &Job) -> Response {
    match rbac::query(&job.request).map(|exec| rbac::answer(&job.grant, exec)) {
        Some(Ok(value)) => Response::value(&value, crate::clock::unix_seconds()),
        Some(Err(e)) => Response::error(&e),
        None => Response::error(&ProtocolError::bad_request("not a canInvoke query")),
    }
}

/// Runs one exchange unless the target's breaker is open, counts it and
/// tells the target's health how it went.
pub async fn measured<F>(
    metrics: &Metrics,
    target: &Target,
    exchange: F,
) -> Result<Vec<Response>, ClientError>
where
    F: Future<Output = Result<Vec<Response>, ClientError>>,
{
    if let Some(why) = target.health.refusal() {
        metrics.exchange(&target.health, "circuit_open", 0.0);
        return Err(ClientError::Unavailable(why));
    }
    let started = std::time::Instant::now();
    let result = exchange.await;
    match &result {
        Ok(_) => target.health.record_exchange(Ok(started.elapsed())),
        Err(e) if agent_fault(e) => target.health.record_exchange(Err(e.to_string())),
        Err(_) => {}
    }
    let outcome = match &result {
        Ok(_) => "ok",
        Err(ClientError::Timeout(_)) => "timeout",
        Err(ClientError::Connect(_)) => "unreachable",
        Err(ClientError::Http { .. }) => "http_error",
        Err(ClientError::BulkRefused(_) | ClientError::Refused { .. }) => "refused",
        Err(ClientError::TooLarge(_)) => "too_large",
        Err(ClientError::Busy(_)) => "busy",
        Err(ClientError::Unavailable(_)) => "circuit_open",
        Err(_) => "bad_answer",
    };
    metrics.exchange(&target.health, outcome, started.elapsed().as_secs_f64());
    result
}

/// The agent's fault (or the path to it), which its health records; not
/// the gateway's budget, a too large answer or a request the agent refused.
fn agent_fault(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Connect(_)
            | ClientError::Timeout(_)
            | ClientError::Http { .. }
            | ClientError::BadAnswer(_)
            | ClientError::Transport(_)
    )
}

/// Removes what the grant may not see from a list or search answer.
fn filtered(answer: Response, request: &Request, how: &AnswerFilter) -> Response {
    let (plan, grant) = (how.plan, &how.grant);
    if grant.is_open()
        || answer.is_error()
        || !matches!(plan, Plan::FilterList | Plan::FilterSearch)
    {
        return answer;
    }
    // Protocol 8's listCache shape, whatever the path.
    if let (Command::List(_), Plan::FilterList, Some(true)) =
        (&request.command, plan, request.params.flag("listCache"))
    {
        if let Some(raw) = answer.get("value") {
            match filter::filter_cached_list_raw(raw, grant) {
                Some(None) => return answer,
                Some(Some(kept)) => {
                    let mut answer = answer;
                    answer.set_raw("value", kept);
                    return answer;
                }
                None => {}
            }
        }
    }
    // With listCache (protocol 8) an answer cut by maxDepth above the
    // MBean level is keyed by domain whatever the path, as a list of
    // domains is.
    let list_path = match &request.command {
        Command::List(l) if request.params.flag("listCache") == Some(true) => l
            .path
            .as_deref()
            .filter(|p| crate::protocol::path::split(p).len() > 1),
        Command::List(l) => l.path.as_deref(),
        _ => None,
    };
    // Lists of domains or of a domain's MBeans: filtered on the text.
    if let (Command::List(_), Plan::FilterList, false) = (&request.command, plan, how.to_domains) {
        if let Some(raw) = answer.get("value") {
            match filter::filter_list_raw(raw, list_path, grant) {
                Some(Ok(None)) => return answer,
                Some(Ok(Some(kept))) => {
                    let mut answer = answer;
                    answer.set_raw("value", kept);
                    return answer;
                }
                Some(Err(denied)) => return list_denied(denied),
                None => {}
            }
        }
    }
    // A 304 (not modified) answer carries no value.
    let Some(value) = answer.field::<serde_json::Value>("value") else {
        return answer;
    };
    let kept = match (&request.command, plan) {
        (Command::List(_), Plan::FilterList) => {
            match filter::filter_list(value, list_path, grant) {
                Ok(v) if how.to_domains => filter::to_domains(v),
                Ok(v) => v,
                Err(denied) => return list_denied(denied),
            }
        }
        (Command::Search(s), _) => match filter::filter_search(value, grant) {
            serde_json::Value::Array(names) => {
                serde_json::Value::Array(rbac::searched(&s.mbean, names))
            }
            other => other,
        },
        _ => filter::filter_search(value, grant),
    };
    let mut answer = answer;
    answer.set("value", &kept);
    answer
}

/// A list the caller may not see, in Jolokia's words.
fn list_denied(filter::ListDenied(why): filter::ListDenied) -> Response {
    Response::error(&ProtocolError::new(403, "java.lang.SecurityException", why))
}

/// One agent's share of the work: a single bulk call, and if the agent
/// refuses the bulk as a whole (one item it can't parse fails them all),
/// each item again on its own so only the culprit fails. Always returns
/// one answer per request.
pub async fn exchange<'a, R, F, Fut>(target: &Target, requests: &'a [R], send: F) -> Vec<Response>
where
    F: Fn(&'a [R]) -> Fut,
    Fut: Future<Output = Result<Vec<Response>, ClientError>>,
{
    let failed = |e: &ClientError| {
        let target_name = target.name.as_str();
        // A target's going down is logged once, by its health
        // (`TargetHealth::record_exchange`); each exchange that finds it
        // down (or its breaker open) is no news.
        if agent_fault(e) || matches!(e, ClientError::Unavailable(_)) {
            tracing::debug!(target_name, error = %e, items = requests.len(), "agent exchange failed");
        } else {
            tracing::warn!(target_name, error = %e, items = requests.len(), "agent exchange failed");
        }
        Response::error(&exchange_error(target, e))
    };
    match send(requests).await {
        Ok(answers) => answers,
        Err(e) if e.is_bulk_refusal() && requests.len() > 1 => {
            tracing::info!(target_name = %target.name, error = %e, "bulk refused; retrying its items one by one");
            let singles = requests.chunks(1).map(|one| async {
                match send(one).await {
                    Ok(mut answers) => answers.remove(0),
                    Err(e) => failed(&e),
                }
            });
            join_all(singles).await
        }
        Err(e) => {
            let answer = failed(&e);
            vec![answer; requests.len()]
        }
    }
}

/// The per-item error for a failed exchange: names the target, never its
/// URL or credentials, and says so when the target left the fleet (its
/// pod deleted, an inventory edit) while the request was under way. An
/// item the agent refused gets the agent's own message, as if the agent
/// had answered it with an error.
pub fn exchange_error(target: &Target, e: &ClientError) -> ProtocolError {
    if let ClientError::Refused { .. } = e {
        return ProtocolError::new(e.item_status(), e.error_type(), e.to_string());
    }
    let name = &target.name;
    let message = if target.health.is_retired() {
        format!("Target \"{name}\" left the fleet while this request was under way: {e}")
    } else {
        format!("Target \"{name}\": {e}")
    };
    ProtocolError::new(e.item_status(), e.error_type(), message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::AgentClient;
    use crate::protocol::Version;
    use std::time::Duration;

    fn target(name: &str) -> Arc<Target> {
        let url = url::Url::parse("http://127.0.0.1:9/jolokia").unwrap();
        Arc::new(Target {
            name: name.into(),
            labels: Default::default(),
            request_timeout: Duration::from_secs(1),
            client: AgentClient::builder(url).build().unwrap(),
            health: crate::health::HealthBook::default().for_target(name),
            allow_credentials_passthrough: false,
            origin: Default::default(),
        })
    }

    #[test]
    fn groups_keep_order() {
        let (a, b) = (target("a"), target("b"));
        let job = |index, t: &Arc<Target>| {
            Job::open(index, t.clone(), Request::new(Command::Version(Version)))
        };
        let groups = group_by_target(vec![
            job(0, &b),
            job(1, &a),
            job(2, &b),
            job(3, &a),
            job(4, &b),
        ]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].target.name, "b");
        assert_eq!(indices(&groups[0]), vec![0, 2, 4]);
        assert_eq!(indices(&groups[1]), vec![1, 3]);
    }

    fn indices(group: &Group) -> Vec<usize> {
        group.items.iter().map(|i| i.index).collect()
    }

    #[test]
    fn other_pass_through_credentials_form_their_own_groups() {
        let (a, b) = (target("a"), target("b"));
        let as_user = |index, t: &Arc<Target>, user: Option<&str>| Job {
            credentials: user.map(|u| (u.to_string(), Secret::new("pw"))),
            ..Job::open(index, t.clone(), Request::new(Command::Version(Version)))
        };
        let groups = group_by_target(vec![
            as_user(0, &a, None),
            as_user(1, &a, Some("x")),
            as_user(2, &b, Some("x")),
            as_user(3, &a, Some("y")),
            as_user(4, &a, Some("x")),
            as_user(5, &a, None),
            as_user(6, &a, Some("y")),
        ]);
        let seen: Vec<(&str, Option<&str>, Vec<usize>)> = groups
            .iter()
            .map(|g| {
                let user = g.credentials.as_ref().map(|(u, _)| u.as_str());
                (g.target.name.as_str(), user, indices(g))
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("a", None, vec![0, 5]),
                ("a", Some("x"), vec![1, 4]),
                ("b", Some("x"), vec![2]),
                ("a", Some("y"), vec![3, 6]),
            ]
        );
    }

    #[test]
    fn a_fan_out_sends_one_shared_request_to_every_target() {
        let request = Arc::new(Request::new(Command::Version(Version)));
        let jobs = (0..3)
            .map(|i| Job {
                request: request.clone(),
                ..Job::open(
                    i,
                    target(&format!("t{i}")),
                    Request::new(Command::Version(Version)),
                )
            })
            .collect();
        let groups = group_by_target(jobs);
        assert_eq!(groups.len(), 3);
        assert!(groups
            .iter()
            .all(|g| Arc::ptr_eq(&g.items[0].request, &request)));
    }

    #[test]
    fn exchange_errors_have_fitting_statuses() {
        let a = target("a");
        let t = exchange_error(&a, &ClientError::Timeout(Duration::from_secs(1)));
        assert_eq!(t.status, 504);
        let c = exchange_error(&a, &ClientError::Connect("Connection refused".into()));
        assert_eq!(c.status, 502);
        assert!(
            c.message.starts_with("Target \"a\": cannot connect"),
            "{}",
            c.message
        );
        let h = exchange_error(
            &a,
            &ClientError::Http {
                status: 401,
                hint: "",
                detail: String::new(),
            },
        );
        assert_eq!(h.status, 502);
        // The same target, gone from the fleet while the call was out.
        let book = crate::health::HealthBook::default();
        let gone = Arc::new(Target {
            health: book.for_target("a"),
            ..Arc::into_inner(target("a")).unwrap()
        });
        book.forget(["a"]);
        let g = exchange_error(&gone, &ClientError::Connect("Connection refused".into()));
        assert!(
            g.message.starts_with(
                "Target \"a\" left the fleet while this request was under way: cannot connect"
            ),
            "{}",
            g.message
        );
    }

    fn version(n: i64) -> Request {
        let mut r = Request::new(Command::Version(Version));
        r.params.set("maxDepth", &n.to_string());
        r
    }

    /// Stands in for an agent that refuses any bulk containing the request
    /// marked `maxDepth=13`, the way Jolokia refuses a bulk with one
    /// unparseable item, and answers everything else.
    async fn picky_agent(reqs: &[Request]) -> Result<Vec<Response>, ClientError> {
        if reqs.iter().any(|r| r.params.get("maxDepth") == Some("13")) {
            return Err(ClientError::BulkRefused("bad item".into()));
        }
        Ok(reqs
            .iter()
            .map(|r| Response::value(r.params.get("maxDepth").unwrap(), 0))
            .collect())
    }

    #[tokio::test]
    async fn a_refused_bulk_is_retried_item_by_item() {
        let reqs: Vec<Request> = [1, 13, 3].into_iter().map(version).collect();
        let answers = exchange(&target("t"), &reqs, picky_agent).await;
        let statuses: Vec<u16> = answers.iter().map(|a| a.status().unwrap()).collect();
        assert_eq!(statuses, vec![200, 400, 200]);
        assert_eq!(answers[2].get("value").unwrap().get(), "\"3\"");
        assert!(answers[1].error_text().contains("bad item"));
    }

    #[tokio::test]
    async fn other_failures_fail_the_group_once() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let reqs: Vec<Request> = [1, 2].into_iter().map(version).collect();
        let answers = exchange(&target("t"), &reqs, |_| {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Err(ClientError::Connect("refused".into())) }
        })
        .await;
        assert_eq!(answers.len(), 2);
        assert!(answers.iter().all(|a| a.status() == Some(502)));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
