//! What a client certificate says about its holder: a fingerprint and a
//! principal name taken from the subject or a subject alternative name.

use rustls_pki_types::CertificateDer;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use x509_parser::extensions::GeneralName;

/// Which part of a certificate names its holder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CertPrincipal {
    /// The subject's common name (`cn`), the default.
    #[default]
    Cn,
    /// The first DNS name among the subject alternative names (`san-dns`).
    SanDns,
    /// The first e-mail address (rfc822Name) among the SANs (`san-email`).
    SanEmail,
    /// The first URI among the SANs (`san-uri`), e.g. a SPIFFE ID.
    SanUri,
}

/// SHA-256 over the DER encoding, as 64 lowercase hex digits without colons.
pub fn fingerprint_sha256(cert: &CertificateDer<'_>) -> String {
    use std::fmt::Write;
    Sha256::digest(cert.as_ref())
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The holder's name as `from` says, or `None` if the certificate does not
/// parse or has no such (non-empty) name. For [`CertPrincipal::Cn`] the
/// subject must have exactly one common name: several are ambiguous, so
/// none is used.
pub fn principal_from_cert(cert: &CertificateDer<'_>, from: CertPrincipal) -> Option<String> {
    let (_, x509) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let name = match from {
        CertPrincipal::Cn => {
            let mut cns = x509.subject().iter_common_name();
            let cn = cns.next()?;
            if cns.next().is_some() {
                return None;
            }
            cn.as_str().ok()?
        }
        kind => {
            let san = x509.subject_alternative_name().ok()??;
            san.value
                .general_names
                .iter()
                .find_map(|name| match (kind, name) {
                    (CertPrincipal::SanDns, GeneralName::DNSName(s))
                    | (CertPrincipal::SanEmail, GeneralName::RFC822Name(s))
                    | (CertPrincipal::SanUri, GeneralName::URI(s)) => Some(*s),
                    _ => None,
                })?
        }
    };
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};

    fn cert(params: CertificateParams) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn fingerprint_is_lowercase_hex_sha256() {
        assert_eq!(
            fingerprint_sha256(&CertificateDer::from(Vec::new())),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            fingerprint_sha256(&CertificateDer::from(b"abc".to_vec())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let c = cert(CertificateParams::new(Vec::<String>::new()).unwrap());
        let fp = fingerprint_sha256(&c);
        assert_eq!(fp.len(), 64);
        assert!(fp.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
    }

    #[test]
    fn principals() {
        let mut params =
            CertificateParams::new(vec!["one.example".to_string(), "two.example".to_string()])
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example");
        params.subject_alt_names.extend([
            SanType::Rfc822Name("alice@example.com".try_into().unwrap()),
            SanType::URI("spiffe://example/alice".try_into().unwrap()),
            SanType::Rfc822Name("other@example.com".try_into().unwrap()),
        ]);
        let c = cert(params);
        let p = |from| principal_from_cert(&c, from);
        assert_eq!(p(CertPrincipal::Cn).as_deref(), Some("alice"));
        assert_eq!(p(CertPrincipal::SanDns).as_deref(), Some("one.example"));
        assert_eq!(
            p(CertPrincipal::SanEmail).as_deref(),
            Some("alice@example.com")
        );
        assert_eq!(
            p(CertPrincipal::SanUri).as_deref(),
            Some("spiffe://example/alice")
        );
    }

    #[test]
    fn missing_or_ambiguous_names() {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example");
        let c = cert(params);
        for from in [
            CertPrincipal::Cn,
            CertPrincipal::SanDns,
            CertPrincipal::SanEmail,
            CertPrincipal::SanUri,
        ] {
            assert_eq!(principal_from_cert(&c, from), None, "{from:?}");
        }
        assert_eq!(
            principal_from_cert(&CertificateDer::from(b"junk".to_vec()), CertPrincipal::Cn),
            None
        );
    }

    #[test]
    fn serde_names() {
        #[derive(Deserialize)]
        struct W {
            from: Vec<CertPrincipal>,
        }
        let w: W = toml::from_str(r#"from = ["cn", "san-dns", "san-email", "san-uri"]"#).unwrap();
        assert_eq!(
            w.from,
            [
                CertPrincipal::Cn,
                CertPrincipal::SanDns,
                CertPrincipal::SanEmail,
                CertPrincipal::SanUri
            ]
        );
        assert!(toml::from_str::<W>(r#"from = ["san_dns"]"#).is_err());
    }
}
