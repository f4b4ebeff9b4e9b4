//! `version`: the agent's (or, without a target, the gateway's) version,
//! protocol and configuration. It takes no arguments.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version;
