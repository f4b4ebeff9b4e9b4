//! Who is asking: the domain types the authenticate step produces and
//! access control, audit and the configuration read. A leaf module.

use serde::Deserialize;

/// How the caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMethod {
    /// No credentials were checked.
    Anonymous,
    /// HTTP Basic against the users file.
    Basic,
    /// A bearer JWT.
    Bearer,
    /// The verified client certificate of a TLS connection.
    Mtls,
    /// A bearer token the Kubernetes API server accepts (TokenReview).
    Kubernetes,
    /// The gateway's own configured identity (an OTLP export), no caller;
    /// never a listener's method.
    #[serde(skip_deserializing)]
    Configured,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Anonymous => "anonymous",
            AuthMethod::Basic => "basic",
            AuthMethod::Bearer => "bearer",
            AuthMethod::Mtls => "mtls",
            AuthMethod::Kubernetes => "kubernetes",
            AuthMethod::Configured => "configured",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub method: AuthMethod,
    /// Role names the credential carries (users file, JWT claim, or the
    /// certificate mapping). The anonymous principal's role comes from
    /// `access.anonymous_role` instead.
    pub roles: Vec<String>,
    /// SHA-256 of the client certificate, for mTLS principals.
    pub certificate_sha256: Option<String>,
    /// Roles held on one namespace's targets only, as (role, namespace):
    /// the role reaches those of its targets labelled `namespace=<ns>`
    /// (Kubernetes RBAC by SubjectAccessReview, `[[auth.kubernetes.access]]`).
    pub namespaced_roles: Vec<(String, String)>,
}

impl Principal {
    pub fn anonymous() -> Principal {
        Principal {
            name: "anonymous".into(),
            method: AuthMethod::Anonymous,
            roles: Vec::new(),
            certificate_sha256: None,
            namespaced_roles: Vec::new(),
        }
    }
}
