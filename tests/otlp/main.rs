//! The OTLP export: pushes to real receivers and to hostile ones of our
//! own.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/victoria.rs"]
mod victoria;

mod otlp_export;
