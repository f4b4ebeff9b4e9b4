//! Step 2, authenticate: who is calling. Produces the [`Principal`] every
//! later step (authorize, audit) works with.

use http::HeaderMap;

/// How the caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// No credentials were checked.
    Anonymous,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Anonymous => "anonymous",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub method: AuthMethod,
}

impl Principal {
    pub fn anonymous() -> Principal {
        Principal {
            name: "anonymous".into(),
            method: AuthMethod::Anonymous,
        }
    }
}

/// Identifies the caller. The gateway has no credential stores configured
/// yet, so every caller is the anonymous principal and `version` reports
/// `secured: false`.
pub fn authenticate(_headers: &HeaderMap) -> Principal {
    Principal::anonymous()
}

/// Whether callers must prove who they are (reported by `version`).
pub fn is_secured() -> bool {
    false
}
