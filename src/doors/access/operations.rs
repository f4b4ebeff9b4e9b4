//! The operations of the access-requests API, one method each, for one
//! caller: what it may see and review is worked out once ([`Asking`]),
//! the rules are `elevation`'s and every change is the store's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::access::elevation::{self, Refusal};
use crate::store::{NewRequest, RequestKind, RequestState, Store, StoredRequest, Verdict};

use super::{bare, refusal, reviewed_under, store_error, wire, AccessCall, Answer, StepNames};
use crate::pipeline::respond::HttpError;
use crate::pipeline::state::State;
use crate::pipeline::Gateway;

/// One caller's operation, with what it may see worked out.
pub(crate) struct Asking<'a> {
    pub gateway: &'a Gateway,
    pub state: &'a State,
    pub store: Arc<Store>,
    pub caller: &'a AccessCall<'a>,
    /// The caller's standing role names, and the roles whose requests
    /// it may review now (by name; [`Asking::reviews`] judges its reach).
    pub standing: Vec<String>,
    pub may_review: Vec<String>,
    /// Whether the caller's approver roles reach what a request for
    /// (role, targets) names, worked out once per pair.
    pub reach: Mutex<HashMap<(String, Option<String>), bool>>,
    /// Who the caller is across methods (`AccessControl::identity_of`):
    /// its own requests are those of this identity.
    pub identity: String,
}

impl Asking<'_> {
    /// The caller as requests key their requester.
    fn me(&self) -> &str {
        &self.identity
    }

    /// The caller's name, as reviews and revocations show it.
    fn name(&self) -> &str {
        &self.caller.ctx.principal.name
    }

    /// Whether `r` is the caller's own: by identity, or by a name shown
    /// as the requester's (a reviewer with the requester's name through
    /// another method is taken to be the same person: no one approves
    /// what may be their own).
    fn own(&self, r: &StoredRequest) -> bool {
        r.request.requester == self.me() || r.request.requester_name.as_deref() == Some(self.name())
    }

    /// Whether the caller reviews `r`: one of its roles is an approver of
    /// the request's role, and those it holds, as held (a role held in a
    /// namespace reaches that namespace only), reach every target the
    /// request names.
    fn reviews(&self, r: &StoredRequest) -> bool {
        if !self.may_review.contains(&r.request.role) {
            return false;
        }
        let key = (r.request.role.clone(), r.request.targets.clone());
        if let Some(known) = self.reach.lock().expect("reach lock").get(&key) {
            return *known;
        }
        let configs = self.state.access.role_configs();
        let approvers = configs
            .iter()
            .find(|c| c.name == r.request.role)
            .map_or(&[][..], |c| c.approvers.as_slice());
        let covered = match self.state.access.granted_role(
            &r.request.role,
            r.request.targets.as_deref(),
            &r.request.id,
        ) {
            Some(granted) => {
                crate::access::keeps_within(
                    &self.caller.ctx.standing,
                    approvers,
                    r.request.targets.as_deref(),
                ) && crate::access::cover(
                    &self.caller.ctx.standing,
                    approvers,
                    self.state
                        .fleet
                        .iter()
                        .filter(|t| granted.reaches(t))
                        .map(|t| &**t),
                )
            }
            None => false,
        };
        self.reach.lock().expect("reach lock").insert(key, covered);
        covered
    }

    /// The caller's own requests and those it may review.
    fn visible(&self, r: &StoredRequest) -> bool {
        r.request.requester == self.me() || self.reviews(r)
    }

    /// A request as this caller reads it (whether it may review it now).
    fn view(&self, r: &StoredRequest) -> serde_json::Value {
        let reviewer = !self.own(r)
            && r.state == RequestState::Pending
            && self.reviews(r)
            && !r.reviews.iter().any(|v| v.reviewer == self.name());
        wire::view(r, reviewer)
    }

    /// Request `id` if the caller may see it; else the same 404 as for one
    /// that doesn't exist.
    async fn visible_request(&self, id: &str) -> Result<StoredRequest, (HttpError, StepNames)> {
        let found = self
            .store
            .request(id)
            .await
            .map_err(|e| bare(store_error(e, id)))?;
        if !self.visible(&found) {
            return Err(bare(wire::not_found(id)));
        }
        Ok(found)
    }

    pub async fn list(&self, q: &wire::ListQuery) -> Answer {
        // Pending requests past their time show as expired.
        crate::doors::access::expire_due(self.gateway, self.state, &self.store).await;
        let found = self
            .store
            .requests_for(self.me(), &self.may_review, q.limit)
            .await
            .map_err(|e| bare(store_error(e, "-")))?;
        let shown: Vec<_> = found
            .iter()
            .filter(|r| self.visible(r))
            .filter(|r| q.state.as_deref().is_none_or(|s| r.state.as_str() == s))
            .map(|r| self.view(r))
            .collect();
        Ok((200, json!({ "requests": shown })))
    }

    pub async fn show(&self, id: &str) -> Answer {
        let found = self.visible_request(id).await?;
        Ok((200, self.view(&found)))
    }

    pub async fn create(&self, asked: wire::Create) -> Answer {
        let step = StepNames {
            role: Some(asked.role.clone()),
            ..StepNames::default()
        };
        let with = |e: HttpError| (e, step.clone());
        let reason = wire::text("reason", asked.reason.as_deref()).map_err(with)?;
        let config = elevation::check_request(
            self.state.access.role_configs(),
            &asked.role,
            &self.standing,
            asked.duration,
            reason.as_deref(),
        )
        .map_err(|r| with(refusal(r)))?;
        let targets = match asked.targets.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(t) => Some(t),
        };
        let targets = crate::doors::access::within_reach(
            self.gateway,
            self.state,
            config,
            targets,
            &self.caller.ctx.standing,
        )
        .map_err(with)?;
        let new = NewRequest {
            id: wire::new_id(),
            kind: RequestKind::Role,
            requester: self.me().to_string(),
            requester_name: Some(self.name().to_string()),
            role: config.name.clone(),
            targets,
            reason,
            item: None,
            duration_ms: asked.duration.as_millis() as i64,
            approvals_needed: i64::from(config.approvals.max(1)),
        };
        let made = self
            .store
            .create_request(&new, self.state.max_pending_requests)
            .await
            .map_err(|e| with(store_error(e, &new.id)))?;
        let note = format!(
            "asked for {} on {}",
            humantime::format_duration(asked.duration),
            made.request
                .targets
                .as_deref()
                .unwrap_or("all of the role's targets")
        );
        crate::doors::access::audit_access(
            self.gateway,
            self.caller,
            "access_requested",
            &made,
            "allowed",
            201,
            &note,
        )
        .await
        .map_err(bare)?;
        crate::doors::access::announce_access_step(
            self.gateway,
            self.state,
            "access_requested",
            &made,
        );
        Ok((201, self.view(&made)))
    }

    pub async fn review(&self, id: &str, verdict: Verdict, review: &wire::Review) -> Answer {
        let found = self.visible_request(id).await?;
        let step = StepNames::of(&found);
        let with = |e: HttpError| (e, step.clone());
        let config = reviewed_under(self.state.access.role_configs(), &found).ok_or_else(|| {
            with(HttpError::new(
                409,
                "jmxgate.Conflict",
                format!(
                    "access request {id} is for role \"{}\", which is no longer configured",
                    found.request.role
                ),
            ))
        })?;
        elevation::check_review(config, self.own(&found), &self.standing)
            .map_err(|r| with(refusal(r)))?;
        let comment = wire::text("comment", review.comment.as_deref()).map_err(with)?;
        // A request past its pending time is expired, not reviewed.
        crate::doors::access::expire_due(self.gateway, self.state, &self.store).await;
        let reviewed = self
            .store
            .review(id, self.name(), verdict, comment.as_deref())
            .await
            .map_err(|e| with(store_error(e, id)))?;
        super::elevation(self.gateway).forget(&reviewed.request.requester);
        let approvals = reviewed
            .reviews
            .iter()
            .filter(|v| v.verdict == Verdict::Approve)
            .count();
        let needed = reviewed.request.approvals_needed;
        let (event, note) = match (verdict, reviewed.state) {
            (Verdict::Deny, _) => ("access_denied", "denied".to_string()),
            (Verdict::Approve, RequestState::Approved) => (
                "access_granted",
                format!(
                    "approved ({approvals} of {needed}); granted until {}",
                    reviewed.expires_ms.map(wire::time).unwrap_or_default()
                ),
            ),
            (Verdict::Approve, _) => (
                "access_reviewed",
                format!("approved ({approvals} of {needed})"),
            ),
        };
        crate::doors::access::audit_access(
            self.gateway,
            self.caller,
            event,
            &reviewed,
            "allowed",
            200,
            &note,
        )
        .await
        .map_err(bare)?;
        if event != "access_reviewed" {
            crate::doors::access::announce_access_step(self.gateway, self.state, event, &reviewed);
        }
        Ok((200, self.view(&reviewed)))
    }

    /// By the requester, or by someone who may review the request now.
    pub async fn revoke(&self, id: &str) -> Answer {
        let found = self.visible_request(id).await?;
        let step = StepNames::of(&found);
        let with = |e: HttpError| (e, step.clone());
        if found.request.requester != self.me() && !self.reviews(&found) {
            return Err(with(refusal(Refusal::NotApprover)));
        }
        let revoked = self
            .store
            .revoke(id, self.name())
            .await
            .map_err(|e| with(store_error(e, id)))?;
        super::elevation(self.gateway).forget(&revoked.request.requester);
        crate::doors::access::audit_access(
            self.gateway,
            self.caller,
            "access_revoked",
            &revoked,
            "allowed",
            200,
            "revoked",
        )
        .await
        .map_err(bare)?;
        crate::doors::access::announce_access_step(
            self.gateway,
            self.state,
            "access_revoked",
            &revoked,
        );
        Ok((200, self.view(&revoked)))
    }
}
