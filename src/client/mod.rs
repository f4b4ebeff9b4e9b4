//! Jolokia clients, by audience: [`AgentClient`] (`agent.rs`) is the
//! gateway's own side towards agents, which the dispatch step is built
//! on; [`JolokiaClient`] (`jolokia.rs`) is the public client for
//! applications and the `jmxgate` command line (`src/cli/`);
//! [`Poller`] sends registered requests as one bulk per period. Both
//! clients share the TLS setup in `agent.rs`.

mod agent;
/// The deepest cause of an error chain, as said to operators.
pub(crate) use agent::innermost_cause;
mod jolokia;
mod poller;
mod quick_ack;
mod slots;

pub use agent::*;
pub use jolokia::{
    ArgumentInfo, AttributeInfo, HttpMethod, JolokiaClient, JolokiaClientBuilder, JolokiaError,
    MBeanInfo, MBeanTree, OperationInfo, Overloads, RemoteError, Reply, TlsVersion, VersionInfo,
};
pub use poller::{JobId, Poller};
pub use quick_ack::open_connections as open_agent_connections;
