//! Work with no request: OTLP pushes and webhooks, each run off the
//! request path under a system context.

pub mod otlp;
pub mod webhooks;
