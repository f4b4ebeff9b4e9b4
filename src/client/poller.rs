//! Periodic requests, as jolokia.js' scheduler does: every registered
//! request goes out in one bulk per period, and each answer goes to its
//! request's callback. A job registered "only if modified" (for `list`)
//! sends `ifModifiedSince` and hears only of changes.
//!
//! ```no_run
//! # async fn demo(client: jmxgate::client::JolokiaClient) -> Result<(), Box<dyn std::error::Error>> {
//! use jmxgate::client::Poller;
//! use jmxgate::protocol::Request;
//! use std::time::Duration;
//!
//! let mut poller = Poller::new(client);
//! poller.register(Request::read("java.lang:type=Threading", Some("ThreadCount"))?, |answer| {
//!     println!("{answer:?}");
//! });
//! poller.start(Duration::from_secs(10));
//! // … later
//! poller.stop();
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::jolokia::{JolokiaClient, JolokiaError, Reply};
use crate::protocol::Request;

/// Identifies a registered request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobId(u64);

type Callback = Box<dyn FnMut(Result<Reply, JolokiaError>) + Send>;

struct Job {
    id: JobId,
    request: Request,
    only_if_modified: bool,
    /// The timestamp of the last full answer (for `ifModifiedSince`).
    last: Option<u64>,
    /// The value last passed on, for "only if modified" jobs: agents count
    /// changes by the second, so within the second of a change they answer
    /// in full again with the same value.
    last_value: Option<serde_json::Value>,
    callback: Callback,
}

#[derive(Default)]
struct Jobs {
    next: u64,
    jobs: Vec<Job>,
    /// Bumped by every stop: a round of an older run that comes back
    /// after a stop (abort can't cut a round that is already past its last
    /// await) finds it changed and tells nobody.
    run: u64,
}

/// Sends every registered request as one bulk per period and hands each
/// answer to its request's callback, as jolokia.js' scheduler does.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use jmxgate::client::{JolokiaClient, Poller};
/// use jmxgate::protocol::Request;
///
/// let client = JolokiaClient::builder("http://gateway:8080/jolokia")
///     .target("kafka-1")
///     .build()?;
/// let mut poller = Poller::new(client);
/// let job = poller.register(
///     Request::read("java.lang:type=Memory", Some("HeapMemoryUsage"))?,
///     |answer| match answer {
///         Ok(reply) => println!("heap: {}", reply.value["used"]),
///         Err(e) => eprintln!("heap: {e}"),
///     },
/// );
/// // The MBean tree, passed on only when it changed.
/// poller.register_only_if_modified(Request::list(None), |tree| {
///     println!("the MBeans changed: {}", tree.is_ok());
/// });
/// poller.start(Duration::from_secs(10));
/// tokio::time::sleep(Duration::from_secs(60)).await;
/// poller.stop();
/// poller.unregister(job);
/// poller.start(Duration::from_secs(30)); // again, with the rest
/// # Ok(()) }
/// ```
pub struct Poller {
    client: JolokiaClient,
    jobs: Arc<Mutex<Jobs>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Poller {
    /// A stopped poller with no jobs, sending through `client`.
    pub fn new(client: JolokiaClient) -> Poller {
        Poller {
            client,
            jobs: Arc::default(),
            task: None,
        }
    }

    /// Registers a request; its callback gets every answer (or error).
    pub fn register(
        &mut self,
        request: Request,
        callback: impl FnMut(Result<Reply, JolokiaError>) + Send + 'static,
    ) -> JobId {
        self.add(request, false, Box::new(callback))
    }

    /// Registers a request whose callback hears only of changes: it is
    /// sent with `ifModifiedSince` (the last answer's timestamp), and a
    /// 304 answer is not passed on. Meant for `list` (and `search`).
    pub fn register_only_if_modified(
        &mut self,
        request: Request,
        callback: impl FnMut(Result<Reply, JolokiaError>) + Send + 'static,
    ) -> JobId {
        self.add(request, true, Box::new(callback))
    }

    fn add(&mut self, request: Request, only_if_modified: bool, callback: Callback) -> JobId {
        let mut jobs = self.jobs.lock().expect("jobs lock");
        let id = JobId(jobs.next);
        jobs.next += 1;
        jobs.jobs.push(Job {
            id,
            request,
            only_if_modified,
            last: None,
            last_value: None,
            callback,
        });
        id
    }

    /// Removes a job; `false` if it was not registered.
    pub fn unregister(&mut self, id: JobId) -> bool {
        let mut jobs = self.jobs.lock().expect("jobs lock");
        let before = jobs.jobs.len();
        jobs.jobs.retain(|j| j.id != id);
        jobs.jobs.len() != before
    }

    /// Starts polling now and then every `period` (a running poller is
    /// restarted with the new period). Needs a Tokio runtime.
    pub fn start(&mut self, period: Duration) {
        self.stop();
        let client = self.client.clone();
        let jobs = self.jobs.clone();
        // `stop` moved `run` on if a task ran: older rounds can't match.
        let run = jobs.lock().expect("jobs lock").run;
        self.task = Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            // A slow agent delays the next round instead of causing a burst.
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                poll_once(&client, &jobs, run).await;
            }
        }));
    }

    /// Stops polling; registered jobs stay for the next [`start`](Self::start).
    /// Once it returns, no callback runs until the next start.
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            // Waits for a round that is passing answers on right now.
            self.jobs.lock().expect("jobs lock").run += 1;
        }
    }

    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One round: all jobs in one bulk, answers to their callbacks.
async fn poll_once(client: &JolokiaClient, jobs: &Mutex<Jobs>, run: u64) {
    let (ids, requests): (Vec<JobId>, Vec<Request>) = {
        let jobs = jobs.lock().expect("jobs lock");
        jobs.jobs
            .iter()
            .map(|j| {
                let mut r = j.request.clone();
                if let (true, Some(t)) = (j.only_if_modified, j.last) {
                    r.params.set("ifModifiedSince", &t.to_string());
                }
                (j.id, r)
            })
            .unzip()
    };
    if requests.is_empty() {
        return;
    }
    let results = client.bulk_results(&requests).await;
    let mut jobs = jobs.lock().expect("jobs lock");
    if jobs.run != run {
        return;
    }
    match results {
        Ok(results) => {
            for (id, result) in ids.into_iter().zip(results) {
                // Unregistered while the bulk was out: nobody to tell.
                let Some(job) = jobs.jobs.iter_mut().find(|j| j.id == id) else {
                    continue;
                };
                match result {
                    Ok(reply) if reply.status == 304 && job.only_if_modified => {}
                    Ok(reply) if job.only_if_modified => {
                        job.last = Some(reply.timestamp);
                        if job.last_value.as_ref() != Some(&reply.value) {
                            job.last_value = Some(reply.value.clone());
                            (job.callback)(Ok(reply));
                        }
                    }
                    Ok(reply) => {
                        job.last = Some(reply.timestamp);
                        (job.callback)(Ok(reply));
                    }
                    Err(e) => (job.callback)(Err(JolokiaError::Remote(Box::new(e)))),
                }
            }
        }
        Err(e) => {
            // Each callback hears the exchange's own error kind (connect,
            // timeout, HTTP status…).
            for job in jobs.jobs.iter_mut().filter(|j| ids.contains(&j.id)) {
                (job.callback)(Err(e.clone()));
            }
        }
    }
}
