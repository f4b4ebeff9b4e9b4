//! Authentication: Basic, bearer JWTs, OpenID providers, Kubernetes tokens,
//! and the TLS listener with client certificates.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/access.rs"]
mod access;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/kube_api.rs"]
mod kube_api;
#[path = "../common/oidc.rs"]
mod oidc_provider;

mod auth_through_gateway;
mod bearer_jwt;
mod kubernetes_auth;
mod oidc;
mod tls_listener;
