//! The Jolokia door through the gateway against real agents: the protocol,
//! 2.x agents, failures, shared answers and limits, fleet fan-outs and
//! reductions, agents over HTTPS.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;

mod failures_through_gateway;
mod fleet_fan_out;
mod fleet_reduce;
mod https_agents;
mod jolokia2;
mod protocol_through_gateway;
mod shared_answers_and_limits;
mod target_names;
