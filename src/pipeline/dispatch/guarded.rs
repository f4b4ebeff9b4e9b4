//! Items whose authorization needs the agent's help. A pattern is resolved
//! with `search`, a read of all attributes with `list`; then only the
//! allowed (MBean, attribute) pairs are read, and a write or exec on a
//! pattern runs only if every MBean it matches is allowed. Nothing the
//! policy denies reaches an MBean.
//!
//! MBeans registered between the lookup and the run are not seen by the
//! check; for write and exec on patterns that window is the agent's
//! round-trip time.

use crate::pipeline::authorize::{expand, Denied, Plan};
use crate::protocol::{Command, Read, Request, Response};

use super::{exchange_error, measured, Job};
use crate::metrics::Metrics;

/// How a guarded job ended.
pub enum Outcome {
    /// The answer, the agent's or assembled from the agent's.
    Answer(Response),
    /// Refused by the gateway's own check once the agent told what the
    /// item touches: the audit record says denied, with the rule.
    Refused(Denied),
}

impl From<Response> for Outcome {
    fn from(answer: Response) -> Outcome {
        Outcome::Answer(answer)
    }
}

/// Runs one guarded job.
pub async fn run(job: &Job, metrics: &Metrics) -> Outcome {
    let result = match (&job.plan, &job.request.command) {
        (Plan::ExpandRead, Command::Read(read)) => expand_read(job, metrics, read).await,
        (Plan::CheckPattern, command @ (Command::Write(_) | Command::Exec(_))) => {
            check_pattern(job, metrics, command).await
        }
        // Plans are made for these commands only; anything else is sent as is.
        _ => send(job, metrics, std::slice::from_ref(&job.request))
            .await
            .map(first),
    };
    match result {
        Ok(answer) => Outcome::Answer(answer),
        Err(ended) => ended,
    }
}

fn first(mut answers: Vec<Response>) -> Response {
    answers.swap_remove(0)
}

/// One exchange with the job's agent; a failed exchange is the item's
/// error answer.
async fn send(
    job: &Job,
    metrics: &Metrics,
    requests: &[Request],
) -> Result<Vec<Response>, Outcome> {
    measured(
        metrics,
        &job.target,
        job.target
            .client
            .bulk_as(requests, job.credentials.as_ref()),
    )
    .await
    .map_err(|e| Response::error(&exchange_error(&job.target, &e)).into())
}

async fn check_pattern(
    job: &Job,
    metrics: &Metrics,
    command: &Command,
) -> Result<Response, Outcome> {
    let pattern = command.mbean().expect("write and exec name an MBean");
    let search = expand::search_request(pattern, &job.request);
    let names = expand::names_from_search(&first(send(job, metrics, &[search]).await?))?;
    expand::check_pattern_matches(&job.grant, command, &names).map_err(Outcome::Refused)?;
    send(job, metrics, std::slice::from_ref(&job.request))
        .await
        .map(first)
}

async fn expand_read(job: &Job, metrics: &Metrics, read: &Read) -> Result<Response, Outcome> {
    let ignore_errors = job.request.params.flag("ignoreErrors").unwrap_or(false);
    let style = expand::ErrorStyle::of_protocol(job.target.health.snapshot().protocol.as_deref());
    let pattern = read.mbean.is_pattern();
    let names = if pattern {
        let search = expand::search_request(&read.mbean, &job.request);
        let mut names = expand::names_from_search(&first(send(job, metrics, &[search]).await?))?;
        // MBeans the caller can't touch at all are not there for it.
        names.retain(|n| job.grant.visible(n));
        names
    } else {
        vec![read.mbean.clone()]
    };

    // A read of all attributes needs each MBean's attribute names.
    let mut available = vec![Vec::new(); names.len()];
    if read.attribute == crate::protocol::Attributes::All && !names.is_empty() {
        let lists: Vec<Request> = names.iter().map(expand::list_request).collect();
        let answers = send(job, metrics, &lists).await?;
        for (slot, answer) in available.iter_mut().zip(&answers) {
            if answer.is_error() && !pattern {
                return Err(answer.clone().into());
            }
            *slot = expand::attributes_from_list(answer);
        }
    }

    let pairs: Vec<expand::Pairs> = names
        .iter()
        .zip(&available)
        .map(|(name, attrs)| expand::pairs(&job.grant, name, &read.attribute, attrs))
        .collect();
    let mut pairs = pairs;
    expand::refuse_denied(&pairs, ignore_errors).map_err(Outcome::Refused)?;

    let mut answers: Vec<Option<Response>> = vec![None; pairs.len()];
    let mut to_read: Vec<usize> = (0..pairs.len())
        .filter(|i| !pairs[*i].allowed.is_empty())
        .collect();
    // A 1.x list does not tell write-only attributes apart: one named in a
    // read of all of them fails that read, so it is dropped and the read
    // sent again, as the agent itself skips it.
    while !to_read.is_empty() {
        let reads: Vec<Request> = to_read
            .iter()
            .map(|i| expand::concrete_read(&job.request, read, &pairs[*i]))
            .collect();
        let mut again = Vec::new();
        for (i, answer) in to_read.iter().zip(send(job, metrics, &reads).await?) {
            let write_only = (read.attribute == crate::protocol::Attributes::All)
                .then(|| expand::write_only_attribute(&answer))
                .flatten()
                .filter(|a| pairs[*i].allowed.contains(a));
            match write_only {
                Some(attribute) => {
                    pairs[*i].allowed.retain(|a| *a != attribute);
                    if !pairs[*i].allowed.is_empty() {
                        again.push(*i);
                    }
                }
                None => answers[*i] = Some(answer),
            }
        }
        to_read = again;
    }
    if pattern {
        let parts: Vec<(expand::Pairs, Option<Response>)> =
            pairs.into_iter().zip(answers).collect();
        Ok(expand::assemble_pattern(read, &parts, ignore_errors, style))
    } else {
        Ok(expand::assemble_single(
            read,
            &pairs[0],
            answers[0].as_ref(),
            style,
        ))
    }
}
