//! One request's context (pingora's `CTX`): built once, where the request
//! enters (`doors::router`), and read by every phase and door after it.
//! Work with no HTTP request (an OTLP push) gets a system context for its
//! configured principal ([`RequestContext::system`]), never a fake request.
//!
//! The two things the phases and the audit log derive from a caller are
//! derived here and nowhere else: the facts authorize weighs besides the
//! item ([`RequestContext::facts`]) and who an audit record names
//! ([`RequestContext::who`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::access::Role;
use crate::principal::Principal;

use super::audit::{Channel, Who};
use super::authorize::{EndedGrant, RequestFacts};

/// Who asks, from where, through what, since when.
#[derive(Debug)]
pub(crate) struct RequestContext {
    /// Logged, audited and sent back as `X-Request-Id`.
    pub(crate) id: String,
    /// When the request arrived (an audit record's latency runs from here).
    pub(crate) started: Instant,
    /// The connection's peer; `None` for a system context.
    pub(crate) client: Option<SocketAddr>,
    /// Whether it came through the TLS listener (policies' `<cors>` judge
    /// the page's scheme against it; the gateway's own `version` says it).
    pub(crate) tls: bool,
    pub(crate) principal: Principal,
    /// The principal's own roles: what it may ask for and review (a grant
    /// neither asks for more nor reviews).
    pub(crate) standing: Vec<Arc<Role>>,
    /// The standing roles and those its approved access requests grant now:
    /// what it reaches.
    pub(crate) held: Vec<Arc<Role>>,
    /// Grants it held until lately: a refusal one of them would have
    /// allowed says it ended, and how to ask again.
    pub(crate) ended: Vec<EndedGrant>,
    /// The client chain for policies' `<remote>`
    /// (`AccessControl::client_chain`).
    pub(crate) chain: Vec<String>,
    /// `Origin`, or `Referer` when there is none.
    pub(crate) origin: Option<String>,
    /// The door's channel as audit records name it (`None`: the Jolokia
    /// door, and requests refused before a door took them).
    pub(crate) channel: Option<Channel>,
    /// The names of `standing` and `held`, as audit records list them.
    standing_names: Vec<String>,
    held_names: Vec<String>,
}

/// What a caller's access requests give it on one request.
#[derive(Debug, Default)]
pub(crate) struct Grants {
    /// The roles they grant now, narrowed to their targets.
    pub(crate) held: Vec<Arc<Role>>,
    pub(crate) ended: Vec<EndedGrant>,
}

/// What the router knows of a request once its caller is authenticated.
pub(crate) struct Arrival {
    pub(crate) id: String,
    pub(crate) started: Instant,
    pub(crate) client: Option<SocketAddr>,
    pub(crate) tls: bool,
    pub(crate) chain: Vec<String>,
    pub(crate) origin: Option<String>,
}

impl RequestContext {
    /// An HTTP request's context, its caller holding its standing roles
    /// (grants are added by [`RequestContext::grant`]).
    pub(crate) fn new(arrival: Arrival, principal: Principal, standing: Vec<Arc<Role>>) -> Self {
        let Arrival {
            id,
            started,
            client,
            tls,
            chain,
            origin,
        } = arrival;
        let standing_names = names(&standing);
        RequestContext {
            id,
            started,
            client,
            tls,
            principal,
            held: standing.clone(),
            ended: Vec::new(),
            held_names: standing_names.clone(),
            standing,
            standing_names,
            chain,
            origin,
            channel: None,
        }
    }

    /// Work the gateway does on its own (an OTLP push): its configured
    /// principal holding `held`, no client, no page.
    pub(crate) fn system(
        id: String,
        principal: Principal,
        held: Vec<Arc<Role>>,
        channel: Channel,
    ) -> Self {
        let arrival = Arrival {
            id,
            started: Instant::now(),
            client: None,
            tls: false,
            chain: Vec::new(),
            origin: None,
        };
        let mut ctx = RequestContext::new(arrival, principal, held);
        ctx.channel = Some(channel);
        ctx
    }

    /// The caller also holds what its approved access requests grant now,
    /// and remembers those that ended lately.
    pub(crate) fn grant(&mut self, granted: Grants) {
        self.held.extend(granted.held);
        self.held_names = names(&self.held);
        self.ended = granted.ended;
    }

    /// The listener's scheme, `http` or `https`.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// What authorize weighs besides the item, for a request of `method`:
    /// the client chain, the page's origin, the listener's scheme.
    pub(crate) fn facts<'a>(&'a self, method: &'a str) -> RequestFacts<'a> {
        RequestFacts {
            method,
            chain: &self.chain,
            origin: self.origin.as_deref(),
            scheme: self.scheme(),
            denied_reads_in_place: false,
        }
    }

    /// Who an audit record names, with the roles it reaches by (`held`).
    pub(crate) fn who(&self) -> Who<'_> {
        self.who_as(&self.held_names)
    }

    /// Who a record of a refusal names: the principal's standing roles
    /// (the refusal came before, or regardless of, any grant).
    pub(crate) fn who_standing(&self) -> Who<'_> {
        self.who_as(&self.standing_names)
    }

    fn who_as<'a>(&'a self, roles: &'a [String]) -> Who<'a> {
        Who {
            request_id: &self.id,
            principal: &self.principal,
            roles,
            client: self.client,
            latency: self.started.elapsed(),
            channel: self.channel,
            tool: None,
            mcp_client: None,
        }
    }

    /// The names of the roles the caller holds.
    pub(crate) fn held_names(&self) -> &[String] {
        &self.held_names
    }

    /// The names of its standing roles.
    pub(crate) fn standing_names(&self) -> &[String] {
        &self.standing_names
    }
}

fn names(roles: &[Arc<Role>]) -> Vec<String> {
    roles.iter().map(|r| r.name.clone()).collect()
}
