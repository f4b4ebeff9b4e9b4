//! Authentication: Basic, bearer JWTs, OpenID providers, Kubernetes tokens,
//! and the TLS listener with client certificates.
//!
//! One test binary, a module per file (each file's own comment says what it
//! tests).

#[path = "../common/access.rs"]
mod access;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/four_eyes.rs"]
mod four_eyes;
#[path = "../common/kube_api.rs"]
mod kube_api;
#[path = "../common/oidc.rs"]
mod oidc_provider;

mod auth_through_gateway;
mod bearer_jwt;
mod identities;
mod kubernetes_auth;
mod made_up_credentials;
mod oidc;
mod tls_listener;
