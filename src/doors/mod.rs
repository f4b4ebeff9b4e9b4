//! The doors: each a way in for one kind of client, handing typed requests
//! to the shared phases in `crate::pipeline`, which know no door.

pub mod access;
pub mod console;
pub mod jolokia;
pub mod mcp;
pub mod prometheus;
pub mod router;
