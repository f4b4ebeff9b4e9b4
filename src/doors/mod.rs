//! The doors: each a way in for one kind of client, handing typed requests
//! to the shared phases in `crate::pipeline`, which know no door.

pub mod access;
pub mod console;
pub mod jolokia;
pub mod mcp;
pub mod prometheus;
pub mod router;

use std::sync::Arc;

use crate::pipeline::state::State;

/// `[console.oidc]` made ready: signing in at the provider (none without).
pub(crate) type ConsoleSignIn = Option<Arc<console::sign_in::SignIn>>;

/// The doors' sections of the state in force, which the phases hold
/// without knowing them (the composition root puts them in).
pub(crate) trait DoorSections {
    /// `[mcp]`: where assistants connect, how big a tool result may be.
    fn mcp(&self) -> &mcp::config::McpConfig;
    /// An MCP batch's bounds: a Jolokia bulk's (items, answer bytes, time).
    fn mcp_batch(&self) -> mcp::jsonrpc::BatchBounds;
    /// `[prometheus]`: the scrape endpoint, its modules and plans.
    fn prometheus(&self) -> &Arc<prometheus::exporter::Exporter>;
    /// `[console]`: where the pages are.
    fn console(&self) -> &console::config::ConsoleConfig;
    /// `[console.oidc]`: signing in at the provider.
    fn console_sign_in(&self) -> &ConsoleSignIn;
}

impl DoorSections for State {
    fn mcp(&self) -> &mcp::config::McpConfig {
        self.sections.get()
    }

    fn mcp_batch(&self) -> mcp::jsonrpc::BatchBounds {
        *self.sections.get()
    }

    fn prometheus(&self) -> &Arc<prometheus::exporter::Exporter> {
        self.sections.get()
    }

    fn console(&self) -> &console::config::ConsoleConfig {
        self.sections.get()
    }

    fn console_sign_in(&self) -> &ConsoleSignIn {
        self.sections.get()
    }
}
