//! `config` (protocol 8.1): the agent's identity, protocol and the
//! authentication it asks for. Without a target the gateway answers with
//! its own. It takes no arguments.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config;
