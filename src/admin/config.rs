//! `[admin]`: the admin listener's section, a leaf the configuration reads
//! without importing the listener (which needs the gateway).

use std::net::SocketAddr;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// e.g. `127.0.0.1:9090`.
    pub listen: SocketAddr,
    /// `/readyz` also requires that at least one target answers `version`.
    #[serde(default)]
    pub ready_requires_target: bool,
}
