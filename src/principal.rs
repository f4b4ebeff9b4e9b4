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
    /// Who vouches for the name where more than one could: a bearer
    /// token's `iss`.
    pub issuer: Option<String>,
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
    /// Who this is across methods, as grants, requests and audit trails
    /// key it: `basic:alice`, `mtls:alice`, `kubernetes:system:serviceaccount:ops:ci`,
    /// `bearer:<iss> alice` (`-` for a token without `iss`; an issuer is a
    /// URL, so the first space ends it). A bearer token whose subject is
    /// alice is not Basic alice, unless a mapping says so
    /// (`[[access.people]]`, see `AccessControl::identity_of`). `None`
    /// for anonymous callers: no one's to share.
    pub fn identity(&self) -> Option<String> {
        let method = self.method.as_str();
        match self.method {
            AuthMethod::Anonymous => None,
            AuthMethod::Bearer => Some(format!(
                "{method}:{} {}",
                self.issuer.as_deref().unwrap_or("-"),
                self.name
            )),
            _ => Some(format!("{method}:{}", self.name)),
        }
    }

    pub fn anonymous() -> Principal {
        Principal {
            name: "anonymous".into(),
            method: AuthMethod::Anonymous,
            issuer: None,
            roles: Vec::new(),
            certificate_sha256: None,
            namespaced_roles: Vec::new(),
        }
    }
}
