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
use super::dispatch::{Job, Outcome};
use super::parse::Parsed;
use super::{merge, unix_seconds};

/// Where an item went, as its audit record names it: a name the gateway
/// gives (the selector a fan-out was sent with, `gateway`, a target's
/// name), or a fleet target held by reference, so a fan-out's records
/// copy no names.
#[derive(Debug, Clone)]
pub enum TargetName {
    Text(String),
    Target(Arc<Target>),
}

impl TargetName {
    pub fn as_str(&self) -> &str {
        match self {
            TargetName::Text(name) => name,
            TargetName::Target(target) => &target.name,
        }
    }
}

/// What an item's audit record says besides the request itself.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The target's name once routed (`gateway` for local answers), or the
    /// selector a fan-out was sent with.
    pub target: Option<TargetName>,
    /// `allowed`, `denied` (by a rule) or `invalid` (malformed, unroutable).
    pub decision: &'static str,
    pub rule: Option<Arc<str>>,
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
        let (status, error_type) = ended(answer);
        AuditRow {
            verdict,
            status,
            error_type,
        }
    }
}

/// How an answer ended, for its audit row: its status and error type.
fn ended(answer: &Response) -> (u16, Option<String>) {
    (answer.status().unwrap_or(0), answer.field("error_type"))
}

pub use super::authorize::TargetDecision as TargetOutcome;

/// One target of a fan-out: the target itself and how it was decided
/// (the rule shared with the other targets decided alike).
struct Slot {
    target: Arc<Target>,
    decision: &'static str,
    rule: Arc<str>,
}

/// One item sent to several targets through a selector.
struct FanOut {
    index: usize,
    /// Slots are numbered consecutively from here, one per target.
    first_slot: usize,
    slots: Vec<Slot>,
    /// By position in `slots`, once the target answered: how it ended.
    ended: Vec<Option<(u16, Option<String>)>>,
    answers: FanOutAnswers,
}

/// What a fan-out keeps of its targets' answers.
enum FanOutAnswers {
    /// Folded in as they arrive (`reduce`).
    Reduced(Box<Folder>),
    /// Kept as the text of the merged answer.
    Kept(merge::FanOutAnswers),
}

/// The items of one request, from route to merge.
pub struct Items {
    count: usize,
    verdicts: Vec<Verdict>,
    /// Answers known before dispatch (errors, the gateway's own), by index.
    answers: Vec<(usize, Response)>,
    jobs: Vec<Job>,
    fan_outs: Vec<FanOut>,
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
            target: target.map(TargetName::Text),
            decision,
            rule: rule.map(Arc::from),
        };
        self.answers.push((index, Response::error(error)));
    }

    /// The gateway answers the item itself.
    pub fn answer(
        &mut self,
        index: usize,
        target: Option<String>,
        answer: Response,
        rule: Arc<str>,
    ) {
        self.verdicts[index] = Verdict {
            target: target.map(TargetName::Text),
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
            target: Some(TargetName::Target(target.clone())),
            decision: "allowed",
            rule: Some(allowed.rule),
        };
        self.jobs.push(Job {
            index,
            target,
            request: Arc::new(forwarded(request)),
            plan: allowed.plan,
            grant: allowed.grant,
            credentials,
        });
    }

    /// The item goes to every target a selector reached, each with its
    /// own authorization outcome. `selector` is the client's text. Every
    /// target's job shares the one forwarded request and its decision's
    /// grant.
    pub fn fan_out(
        &mut self,
        index: usize,
        selector: Option<String>,
        request: &Request,
        per_target: Vec<TargetOutcome>,
        reduce: Option<&Reduce>,
    ) {
        self.verdicts[index].target = selector.map(TargetName::Text);
        let shape = match &request.command {
            Command::Read(read) => Shape::of(read),
            _ => Shape::Single,
        };
        let ignore_errors = request.params.flag("ignoreErrors").unwrap_or(false);
        let mut sent = forwarded(request);
        // Answers are merged across targets: always whole.
        sent.params.remove("ifModifiedSince");
        let sent = Arc::new(sent);
        let targets = per_target.len();
        let mut fan_out = FanOut {
            index,
            first_slot: self.next_slot,
            slots: Vec::with_capacity(targets),
            ended: Vec::new(),
            answers: match reduce {
                Some(r) => FanOutAnswers::Reduced(Box::new(Folder::new(r, shape))),
                None => FanOutAnswers::Kept(merge::FanOutAnswers::new(targets, ignore_errors)),
            },
        };
        fan_out.ended.resize_with(targets, || None);
        let mut denied = Vec::new();
        for (target, outcome) in per_target {
            let slot = self.next_slot;
            self.next_slot += 1;
            let (decision, rule) = match outcome {
                Ok(allowed) => {
                    self.jobs.push(Job {
                        index: slot,
                        target: target.clone(),
                        request: sent.clone(),
                        plan: allowed.plan,
                        grant: allowed.grant,
                        credentials: None,
                    });
                    ("allowed", allowed.rule)
                }
                Err(refusal) => {
                    let rule = Arc::from(refusal.rule.as_str());
                    denied.push((slot, refusal));
                    ("denied", rule)
                }
            };
            fan_out.slots.push(Slot {
                target,
                decision,
                rule,
            });
        }
        self.fan_outs.push(fan_out);
        for (slot, refusal) in denied {
            self.accept(slot, Outcome::Answer(Response::error(&refusal.error)));
        }
    }

    /// One answer as dispatch produces it: kept for merge, or folded into
    /// its fan-out at once. One the gateway's own check refused when the
    /// item ran (a guarded plan) is the item's refusal: its audit row says
    /// denied, by that rule.
    pub fn accept(&mut self, index: usize, outcome: Outcome) {
        let (answer, refused_by) = match outcome {
            Outcome::Answer(answer) => (answer, None),
            Outcome::Refused(denied) => (Response::error(&denied.error), Some(denied.rule)),
        };
        if index < self.count {
            if let Some(rule) = refused_by {
                let verdict = &mut self.verdicts[index];
                verdict.decision = "denied";
                verdict.rule = Some(Arc::from(rule));
            }
            self.answers.push((index, answer));
            return;
        }
        // Fan-outs are in slot order: the last one starting at or below.
        let at = self.fan_outs.partition_point(|f| f.first_slot <= index);
        let Some(fan_out) = at.checked_sub(1).map(|i| &mut self.fan_outs[i]) else {
            return;
        };
        let position = index - fan_out.first_slot;
        let Some(slot) = fan_out.slots.get_mut(position) else {
            return;
        };
        if let Some(rule) = refused_by {
            slot.decision = "denied";
            slot.rule = Arc::from(rule);
        }
        fan_out.ended[position] = Some(ended(&answer));
        match &mut fan_out.answers {
            FanOutAnswers::Reduced(folder) => folder.add(&slot.target.name, &answer),
            FanOutAnswers::Kept(kept) => kept.add(position, answer),
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
            let FanOut {
                index,
                slots,
                ended,
                answers,
                ..
            } = fan_out;
            let answer = match answers {
                FanOutAnswers::Reduced(folder) => {
                    let timestamp = match folder.timestamp {
                        0 => unix_seconds(),
                        t => t,
                    };
                    Response::value(&folder.finish(), timestamp)
                }
                FanOutAnswers::Kept(kept) => {
                    kept.finish(|i| &slots[i].target.name, no_answer, unix_seconds())
                }
            };
            let rows = slots
                .into_iter()
                .zip(ended)
                .map(|(slot, ended)| {
                    let (status, error_type) = ended.unwrap_or_else(|| self::ended(&no_answer()));
                    AuditRow {
                        verdict: Verdict {
                            target: Some(TargetName::Target(slot.target)),
                            decision: slot.decision,
                            rule: Some(slot.rule),
                        },
                        status,
                        error_type,
                    }
                })
                .collect();
            self.answers.push((index, answer));
            fanned.insert(index, rows);
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
