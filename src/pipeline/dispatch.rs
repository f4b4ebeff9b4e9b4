//! Step 6, dispatch: items bound for the same agent travel together as one
//! bulk POST; agents are called concurrently, each under its own deadline,
//! so one slow or dead agent delays nobody else.

use std::sync::Arc;

use futures::future::join_all;

use crate::client::ClientError;
use crate::fleet::Target;
use crate::protocol::{ProtocolError, Request, Response};

/// One item on its way to an agent.
#[derive(Debug)]
pub struct Job {
    pub index: usize,
    pub target: Arc<Target>,
    pub request: Request,
}

/// Items for one agent, in the client's order.
#[derive(Debug)]
pub struct Group {
    pub target: Arc<Target>,
    pub indices: Vec<usize>,
    pub requests: Vec<Request>,
}

/// Groups jobs by target, keeping first-seen target order and item order.
pub fn group_by_target(jobs: Vec<Job>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for job in jobs {
        match groups
            .iter_mut()
            .find(|g| Arc::ptr_eq(&g.target, &job.target))
        {
            Some(g) => {
                g.indices.push(job.index);
                g.requests.push(job.request);
            }
            None => groups.push(Group {
                target: job.target,
                indices: vec![job.index],
                requests: vec![job.request],
            }),
        }
    }
    groups
}

/// Sends every group and returns `(index, answer)` pairs; a failed
/// exchange becomes an error answer for each item of its group.
pub async fn dispatch(jobs: Vec<Job>) -> Vec<(usize, Response)> {
    let calls = group_by_target(jobs).into_iter().map(|group| async move {
        let result = group.target.client.bulk(&group.requests).await;
        match result {
            Ok(answers) => group.indices.into_iter().zip(answers).collect::<Vec<_>>(),
            Err(e) => {
                tracing::warn!(target = %group.target.name, error = %e, items = group.indices.len(), "agent exchange failed");
                let answer = Response::error(&exchange_error(&group.target.name, &e));
                group.indices.into_iter().map(|i| (i, answer.clone())).collect()
            }
        }
    });
    join_all(calls).await.into_iter().flatten().collect()
}

/// The per-item error for a failed exchange: names the target, never its
/// URL or credentials.
pub fn exchange_error(target: &str, e: &ClientError) -> ProtocolError {
    ProtocolError::new(
        e.item_status(),
        e.error_type(),
        format!("Target \"{target}\": {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::AgentClient;
    use crate::protocol::{Command, Version};
    use std::time::Duration;

    fn target(name: &str) -> Arc<Target> {
        let url = url::Url::parse("http://127.0.0.1:9/jolokia").unwrap();
        Arc::new(Target {
            name: name.into(),
            url: url.clone(),
            labels: Default::default(),
            request_timeout: Duration::from_secs(1),
            client: AgentClient::builder(url).build().unwrap(),
        })
    }

    #[test]
    fn groups_keep_order() {
        let (a, b) = (target("a"), target("b"));
        let job = |index, t: &Arc<Target>| Job {
            index,
            target: t.clone(),
            request: Request::new(Command::Version(Version)),
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
        assert_eq!(groups[0].indices, vec![0, 2, 4]);
        assert_eq!(groups[1].indices, vec![1, 3]);
    }

    #[test]
    fn exchange_errors_have_fitting_statuses() {
        let t = exchange_error("a", &ClientError::Timeout(Duration::from_secs(1)));
        assert_eq!(t.status, 504);
        let c = exchange_error("a", &ClientError::Connect("Connection refused".into()));
        assert_eq!(c.status, 502);
        assert!(
            c.message.starts_with("Target \"a\": cannot connect"),
            "{}",
            c.message
        );
        let h = exchange_error(
            "a",
            &ClientError::Http {
                status: 401,
                hint: "",
            },
        );
        assert_eq!(h.status, 502);
    }
}
