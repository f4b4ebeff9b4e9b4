//! The console door: pages over HTTP, in a real browser, signed in with
//! OpenID, and Hawtio.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/access.rs"]
mod access;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/four_eyes.rs"]
mod four_eyes;
#[path = "../common/oidc.rs"]
mod oidc;

mod console;
mod console_browser;
mod console_oidc;
mod frame_headers;
mod hawtio;
