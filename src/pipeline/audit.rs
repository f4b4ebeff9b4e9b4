//! Step 8, audit: one record per item, written through `tracing` under the
//! `jmxgate::audit` target so it can be routed to its own sink. Records
//! carry names, never credentials or written values.

use std::net::SocketAddr;
use std::time::Duration;

use super::authenticate::Principal;

/// What happened to one item.
#[derive(Debug)]
pub struct Record<'a> {
    pub request_id: &'a str,
    pub principal: &'a Principal,
    pub client: Option<SocketAddr>,
    pub index: usize,
    /// Target name, or `gateway` for items the gateway answered itself.
    pub target: Option<&'a str>,
    pub kind: Option<&'static str>,
    pub mbean: Option<&'a str>,
    pub status: u16,
    pub error_type: Option<String>,
    /// The policy rule that allowed or denied the item.
    pub rule: Option<&'a str>,
    pub latency: Duration,
}

pub fn record(r: &Record<'_>) {
    tracing::info!(
        target: "jmxgate::audit",
        request_id = r.request_id,
        principal = %r.principal.name,
        auth = r.principal.method.as_str(),
        certificate_sha256 = r.principal.certificate_sha256.as_deref().unwrap_or("-"),
        client = r.client.map(|c| c.to_string()).unwrap_or_default(),
        index = r.index,
        target_name = r.target.unwrap_or("-"),
        kind = r.kind.unwrap_or("-"),
        mbean = r.mbean.unwrap_or("-"),
        status = r.status,
        error_type = r.error_type.as_deref().unwrap_or("-"),
        rule = r.rule.unwrap_or("-"),
        latency_ms = r.latency.as_secs_f64() * 1000.0,
        "item"
    );
}

/// A caller that could not be authenticated. Never the credentials.
pub fn record_auth_failure(
    request_id: &str,
    client: Option<SocketAddr>,
    failure: &super::authenticate::Failure,
) {
    tracing::info!(
        target: "jmxgate::audit",
        request_id,
        client = client.map(|c| c.to_string()).unwrap_or_default(),
        failure = ?failure,
        "authentication failed"
    );
}
