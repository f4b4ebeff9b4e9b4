//! The request's items between the phases: what route and authorize decided
//! for each (its target, decision and rule), the agent jobs that dispatch
//! runs, the answers known before dispatch, and the fan-outs whose
//! per-target answers merge folds back into one. One value replaces
//! parallel vectors indexed by item.

use std::collections::HashMap;
use std::sync::Arc;

use crate::fleet::Target;
use crate::protocol::reduce::{Folder, Reduce, Shape};
use crate::protocol::{Command, ProtocolError, Request, Response};
use crate::secret::Secret;

use super::authorize::Allowed;
use super::dispatch::Job;
use super::parse::Parsed;
use super::{merge, unix_seconds};

/// What an item's audit record says besides the request itself.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The target's name once routed (`gateway` for local answers), or the
    /// selector a fan-out was sent with.
    pub target: Option<String>,
    /// `allowed`, `denied` (by a rule) or `invalid` (malformed, unroutable).
    pub decision: &'static str,
    pub rule: Option<String>,
}

/// One audit row: a verdict and how the item (or one target of a
/// fan-out) ended.
pub struct AuditRow {
    pub verdict: Verdict,
    pub status: u16,
    pub error_type: Option<String>,
}

impl AuditRow {
    fn of(verdict: Verdict, answer: &Response) -> AuditRow {
        AuditRow {
            verdict,
            status: answer.status().unwrap_or(0),
            error_type: answer.field("error_type"),
        }
    }
}

/// One target a selector reached, with its own authorization outcome
/// (the error and the deciding rule when denied).
pub type TargetOutcome = (Arc<Target>, Result<Allowed, (ProtocolError, String)>);

/// One item sent to several targets through a selector.
struct FanOut {
    index: usize,
    ignore_errors: bool,
    /// Slots are numbered consecutively from here, one per target.
    first_slot: usize,
    /// Per target: the answer's slot number and the target's verdict.
    slots: Vec<(usize, String, Verdict)>,
    /// A reduced fan-out folds each answer in as it arrives and keeps
    /// only its audit row.
    reduced: Option<Reduced>,
}

struct Reduced {
    folder: Folder,
    /// By position in `slots`, once the target answered.
    rows: Vec<Option<AuditRow>>,
}

/// The items of one request, from route to merge.
pub struct Items {
    count: usize,
    verdicts: Vec<Verdict>,
    /// Answers known before dispatch (errors, the gateway's own), by index.
    answers: Vec<(usize, Response)>,
    jobs: Vec<Job>,
    fan_outs: Vec<FanOut>,
    /// Answers of fan-out targets, by slot (numbered from `count` up).
    slot_answers: HashMap<usize, Response>,
    next_slot: usize,
}

impl Items {
    pub fn new(count: usize) -> Items {
        Items {
            count,
            verdicts: vec![
                Verdict {
                    target: None,
                    decision: "allowed",
                    rule: None,
                };
                count
            ],
            answers: Vec::with_capacity(count),
            jobs: Vec::new(),
            fan_outs: Vec::new(),
            slot_answers: HashMap::new(),
            next_slot: count,
        }
    }

    /// Every target an agent job goes to (one per target of a fan-out),
    /// until dispatch takes the jobs.
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.jobs.iter().map(|job| &*job.target)
    }

    /// The item fails with `error`; a `rule` means policy denied it, none
    /// that it was malformed or unroutable.
    pub fn fail(
        &mut self,
        index: usize,
        target: Option<String>,
        error: &ProtocolError,
        rule: Option<String>,
    ) {
        let decision = if rule.is_some() { "denied" } else { "invalid" };
        self.verdicts[index] = Verdict {
            target,
            decision,
            rule,
        };
        self.answers.push((index, Response::error(error)));
    }

    /// The gateway answers the item itself.
    pub fn answer(&mut self, index: usize, target: Option<String>, answer: Response, rule: String) {
        self.verdicts[index] = Verdict {
            target,
            decision: "allowed",
            rule: Some(rule),
        };
        self.answers.push((index, answer));
    }

    /// The item goes to `target`'s agent under `allowed`, with the
    /// credentials routing chose.
    pub fn forward(
        &mut self,
        index: usize,
        target: Arc<Target>,
        request: &Request,
        credentials: Option<(String, Secret)>,
        allowed: Allowed,
    ) {
        self.verdicts[index] = Verdict {
            target: Some(target.name.clone()),
            decision: "allowed",
            rule: Some(allowed.rule),
        };
        self.jobs.push(Job {
            index,
            target,
            request: forwarded(request),
            plan: allowed.plan,
            grant: allowed.grant,
            credentials,
        });
    }

    /// The item goes to every target a selector reached, each with its
    /// own authorization outcome. `selector` is the client's text.
    pub fn fan_out(
        &mut self,
        index: usize,
        selector: Option<String>,
        request: &Request,
        per_target: Vec<TargetOutcome>,
        reduce: Option<&Reduce>,
    ) {
        self.verdicts[index].target = selector;
        let shape = match &request.command {
            Command::Read(read) => Shape::of(read),
            _ => Shape::Single,
        };
        let mut fan_out = FanOut {
            index,
            ignore_errors: request.params.flag("ignoreErrors").unwrap_or(false),
            first_slot: self.next_slot,
            slots: Vec::with_capacity(per_target.len()),
            reduced: reduce.map(|r| Reduced {
                folder: Folder::new(r, shape),
                rows: Vec::new(),
            }),
        };
        let mut denied = Vec::new();
        for (target, outcome) in per_target {
            let slot = self.next_slot;
            self.next_slot += 1;
            let (decision, rule) = match outcome {
                Ok(allowed) => {
                    let mut request = forwarded(request);
                    // Answers are merged across targets: always whole.
                    request.params.remove("ifModifiedSince");
                    self.jobs.push(Job {
                        index: slot,
                        target: target.clone(),
                        request,
                        plan: allowed.plan,
                        grant: allowed.grant,
                        credentials: None,
                    });
                    ("allowed", allowed.rule)
                }
                Err((error, rule)) => {
                    denied.push((slot, Response::error(&error)));
                    ("denied", rule)
                }
            };
            let verdict = Verdict {
                target: Some(target.name.clone()),
                decision,
                rule: Some(rule),
            };
            fan_out.slots.push((slot, target.name.clone(), verdict));
        }
        if let Some(r) = &mut fan_out.reduced {
            r.rows.resize_with(fan_out.slots.len(), || None);
        }
        self.fan_outs.push(fan_out);
        for (slot, answer) in denied {
            self.accept(slot, answer);
        }
    }

    /// One answer as dispatch produces it: kept for merge, or folded into
    /// its reduced fan-out at once.
    pub fn accept(&mut self, index: usize, answer: Response) {
        if index < self.count {
            self.answers.push((index, answer));
            return;
        }
        // Fan-outs are in slot order: the last one starting at or below.
        let at = self.fan_outs.partition_point(|f| f.first_slot <= index);
        let Some(fan_out) = at.checked_sub(1).map(|i| &mut self.fan_outs[i]) else {
            return;
        };
        let position = index - fan_out.first_slot;
        match (&mut fan_out.reduced, fan_out.slots.get(position)) {
            (Some(reduced), Some((_, target, verdict))) => {
                reduced.folder.add(target, &answer);
                reduced.rows[position] = Some(AuditRow::of(verdict.clone(), &answer));
            }
            _ => {
                self.slot_answers.insert(index, answer);
            }
        }
    }

    /// The agent jobs for dispatch.
    pub fn take_jobs(&mut self) -> Vec<Job> {
        std::mem::take(&mut self.jobs)
    }

    /// Step 7, merge: every answer at its item's index (fan-outs folded
    /// into one answer keyed by target), the client's own request echoed
    /// in it, with each item's audit rows: one per item, one per target of
    /// a fan-out.
    pub fn merge(mut self, parsed: &Parsed) -> Vec<(Response, Vec<AuditRow>)> {
        let mut fanned: HashMap<usize, Vec<AuditRow>> = HashMap::new();
        for fan_out in std::mem::take(&mut self.fan_outs) {
            if let Some(reduced) = fan_out.reduced {
                let rows = fan_out
                    .slots
                    .into_iter()
                    .zip(reduced.rows)
                    .map(|((_, _, verdict), row)| {
                        row.unwrap_or_else(|| AuditRow::of(verdict, &no_answer()))
                    })
                    .collect();
                let timestamp = match reduced.folder.timestamp {
                    0 => unix_seconds(),
                    t => t,
                };
                self.answers.push((
                    fan_out.index,
                    Response::value(&reduced.folder.finish(), timestamp),
                ));
                fanned.insert(fan_out.index, rows);
                continue;
            }
            let mut per_target = Vec::with_capacity(fan_out.slots.len());
            let mut rows = Vec::with_capacity(fan_out.slots.len());
            for (slot, target, verdict) in fan_out.slots {
                let answer = self.slot_answers.remove(&slot).unwrap_or_else(no_answer);
                rows.push(AuditRow::of(verdict, &answer));
                per_target.push((target, answer));
            }
            self.answers.push((
                fan_out.index,
                merge::merge_fan_out(per_target, fan_out.ignore_errors, unix_seconds()),
            ));
            fanned.insert(fan_out.index, rows);
        }
        merge::merge(self.count, self.answers)
            .into_iter()
            .zip(self.verdicts)
            .zip(&parsed.items)
            .enumerate()
            .map(|(index, ((mut answer, verdict), item))| {
                let params = item
                    .parsed
                    .as_ref()
                    .map_or(&parsed.query, |p| &p.request.params);
                let include = params.flag("includeRequest").unwrap_or(true);
                merge::echo_request(&mut answer, &item.echo, include);
                let rows = fanned
                    .remove(&index)
                    .unwrap_or_else(|| vec![AuditRow::of(verdict, &answer)]);
                (answer, rows)
            })
            .collect()
    }
}

/// A target dispatch gave no answer for (a bug, never expected).
fn no_answer() -> Response {
    Response::error(&ProtocolError::new(
        500,
        "jmxgate.InternalError",
        "No answer was produced for this target",
    ))
}

/// What the agent receives: the typed request with the parameters the
/// gateway decides. Stack traces only when asked (1.x agents send them by
/// default); no echo, since the gateway echoes the client's own request.
fn forwarded(request: &Request) -> Request {
    let mut out = request.clone();
    if out.params.get("includeStackTrace").is_none() {
        out.params.set("includeStackTrace", "false");
    }
    out.params.set("includeRequest", "false");
    out
}
