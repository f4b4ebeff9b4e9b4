//! jmxgate: a single authenticated, policy-checked, audited front door to
//! a fleet of Jolokia agents. See `docs/ARCHITECTURE.md` for the pipeline.

pub mod access;
pub mod admin;
pub mod agent_settings;
pub mod app;
pub mod audit;
pub mod cli;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod discovery;
pub mod doors;
pub mod events;
pub mod exporter;
pub mod fleet;
pub mod health;
pub mod inventory;
pub mod jobs;
pub mod labels;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod open_files;
pub mod pipeline;
pub mod policy;
pub mod principal;
pub mod protocol;
pub mod random;
pub mod reload;
pub mod reload_trigger;
pub mod secret;
pub mod store;
pub mod tls;
pub mod version;
pub mod worker;

pub use config::Config;
pub use pipeline::Gateway;
