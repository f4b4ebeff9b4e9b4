//! The MCP door: the official SDKs as clients, the door's own bounds and
//! answers, and the prompts.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/access.rs"]
mod access;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/four_eyes.rs"]
mod four_eyes;

mod four_eyes_over_mcp;
mod mcp;
mod mcp_door;
mod mcp_prompts;
