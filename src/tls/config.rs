//! The `[tls]` settings and building a rustls server configuration from
//! them. Every error names the setting and the file it is about.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

/// The default for [`TlsConfig::reload_interval`].
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(30);

/// The only application protocol the listener speaks.
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// The HTTPS listener's settings.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// PEM file with the server certificate, followed by its intermediates.
    pub cert_file: PathBuf,
    /// PEM file with the private key: PKCS#8 (`PRIVATE KEY`), SEC1
    /// (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`); not encrypted.
    pub key_file: PathBuf,
    /// PEM bundle of the CAs whose client certificates are accepted. Without
    /// it the server does not ask for client certificates.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// Whether a client must present a certificate (needs `client_ca_file`).
    /// A certificate that is presented is always verified.
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// Lowest protocol version accepted; TLS 1.2 when unset.
    #[serde(default)]
    pub min_version: Option<TlsVersion>,
    /// How often the certificate, key and CA files are checked for changes
    /// (SIGHUP reloads at once). `0s` checks on SIGHUP only.
    #[serde(default = "default_reload_interval", with = "humantime_serde")]
    pub reload_interval: Duration,
}

fn default_reload_interval() -> Duration {
    DEFAULT_RELOAD_INTERVAL
}

/// Whether clients must present a certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientAuth {
    /// A client without a certificate is let in (and may authenticate some
    /// other way); a certificate that is presented must verify.
    #[default]
    Optional,
    /// The handshake fails without a valid client certificate.
    Required,
}

/// A TLS protocol version, as written in the config: `"1.2"` or `"1.3"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum TlsVersion {
    #[serde(rename = "1.2")]
    Tls12,
    #[serde(rename = "1.3")]
    Tls13,
}

impl TlsConfig {
    /// Settings with the defaults: no client certificates, TLS 1.2 and up,
    /// files checked every 30 s.
    pub fn new(listen: SocketAddr, cert_file: PathBuf, key_file: PathBuf) -> TlsConfig {
        TlsConfig {
            listen,
            cert_file,
            key_file,
            client_ca_file: None,
            client_auth: ClientAuth::default(),
            min_version: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }

    /// Makes relative file paths relative to `base` (the directory of the
    /// config file). Absolute paths stay as they are.
    pub fn resolve_relative_paths(&mut self, base: &Path) {
        for p in [&mut self.cert_file, &mut self.key_file]
            .into_iter()
            .chain(self.client_ca_file.as_mut())
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }

    /// The files a change of which calls for a reload.
    pub fn files(&self) -> Vec<&Path> {
        let mut files = vec![self.cert_file.as_path(), self.key_file.as_path()];
        files.extend(self.client_ca_file.as_deref());
        files
    }
}

/// Builds the rustls server configuration: the certificate chain and key,
/// client certificate verification against `client_ca_file` when set, ALPN
/// `http/1.1`, and the ring crypto provider.
pub fn server_config(cfg: &TlsConfig) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&'static rustls::SupportedProtocolVersion] = match cfg.min_version {
        Some(TlsVersion::Tls13) => &[&rustls::version::TLS13],
        Some(TlsVersion::Tls12) | None => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS protocol versions: {e}"))?;

    let chain = load_certs(&cfg.cert_file, "cert_file")?;
    warn_if_not_valid_now(&cfg.cert_file, &chain[0]);
    let key = load_private_key(&cfg.key_file, "key_file")?;

    let builder = match (&cfg.client_ca_file, cfg.client_auth) {
        (None, ClientAuth::Required) => {
            return Err("client_auth = \"required\" needs a client_ca_file".to_string())
        }
        (None, ClientAuth::Optional) => builder.with_no_client_auth(),
        (Some(ca_file), auth) => {
            let mut roots = RootCertStore::empty();
            for (i, cert) in load_certs(ca_file, "client_ca_file")?
                .into_iter()
                .enumerate()
            {
                roots.add(cert).map_err(|e| {
                    file_error(
                        "client_ca_file",
                        ca_file,
                        &format!("certificate #{}: {e}", i + 1),
                    )
                })?;
            }
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            if auth == ClientAuth::Optional {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .map_err(|e| file_error("client_ca_file", ca_file, &e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };

    let mut config = builder.with_single_cert(chain, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => file_error(
            "key_file",
            &cfg.key_file,
            &format!(
                "does not match the certificate in {}",
                cfg.cert_file.display()
            ),
        ),
        rustls::Error::InvalidCertificate(e) => file_error(
            "cert_file",
            &cfg.cert_file,
            &format!("invalid certificate: {e}"),
        ),
        e => file_error("key_file", &cfg.key_file, &e.to_string()),
    })?;
    config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
    Ok(Arc::new(config))
}

fn file_error(setting: &str, path: &Path, cause: &str) -> String {
    format!("{setting} {}: {cause}", path.display())
}

fn pem_error(e: rustls_pki_types::pem::Error, none_found: &str) -> String {
    use rustls_pki_types::pem::Error;
    match e {
        Error::Io(e) => e.to_string(),
        Error::NoItemsFound => none_found.to_string(),
        Error::MissingSectionEnd { end_marker } => format!(
            "not valid PEM: missing {}",
            String::from_utf8_lossy(&end_marker)
        ),
        Error::IllegalSectionStart { line } => format!(
            "not valid PEM: bad line {:?}",
            String::from_utf8_lossy(&line)
        ),
        e => format!("not valid PEM: {e}"),
    }
}

/// The private key in a PEM file; the error names the file and `setting`,
/// never the content.
pub(crate) fn load_private_key(
    path: &Path,
    setting: &str,
) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        file_error(
            setting,
            path,
            &pem_error(
                e,
                "no private key found (unencrypted PKCS#8, SEC1 or PKCS#1 PEM expected)",
            ),
        )
    })
}

/// All certificates in a PEM file; at least one, each a parseable X.509
/// certificate.
pub(crate) fn load_certs(
    path: &Path,
    setting: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file_error(setting, path, &pem_error(e, "no certificate found")))?;
    if certs.is_empty() {
        return Err(file_error(setting, path, "no certificate found"));
    }
    for (i, cert) in certs.iter().enumerate() {
        if let Err(e) = x509_parser::parse_x509_certificate(cert) {
            return Err(file_error(
                setting,
                path,
                &format!(
                    "certificate #{} is not a valid X.509 certificate: {e}",
                    i + 1
                ),
            ));
        }
    }
    Ok(certs)
}

/// An expired server certificate still loads (clients decide), but say so.
fn warn_if_not_valid_now(path: &Path, cert: &CertificateDer<'_>) {
    if let Ok((_, x509)) = x509_parser::parse_x509_certificate(cert) {
        let validity = x509.validity();
        if !validity.is_valid() {
            tracing::warn!(
                cert_file = %path.display(),
                not_before = %validity.not_before,
                not_after = %validity.not_after,
                "the server certificate is not valid now"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<TlsConfig, String> {
        toml::from_str(toml_text).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults() {
        let cfg = parse(
            r#"
            listen = "127.0.0.1:8443"
            cert_file = "server.pem"
            key_file = "server.key"
            "#,
        )
        .unwrap();
        assert_eq!(
            cfg,
            TlsConfig::new(
                "127.0.0.1:8443".parse().unwrap(),
                "server.pem".into(),
                "server.key".into()
            )
        );
        assert_eq!(cfg.client_auth, ClientAuth::Optional);
        assert_eq!(cfg.reload_interval, Duration::from_secs(30));
    }

    #[test]
    fn all_settings() {
        let cfg = parse(
            r#"
            listen = "[::1]:443"
            cert_file = "/etc/jmxgate/server.pem"
            key_file = "server.key"
            client_ca_file = "clients.pem"
            client_auth = "required"
            min_version = "1.3"
            reload_interval = "5m"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.client_auth, ClientAuth::Required);
        assert_eq!(cfg.min_version, Some(TlsVersion::Tls13));
        assert_eq!(cfg.reload_interval, Duration::from_secs(300));
        assert_eq!(cfg.client_ca_file, Some(PathBuf::from("clients.pem")));
    }

    #[test]
    fn rejects_unknown_fields_and_values() {
        let base = "listen = \"127.0.0.1:1\"\ncert_file = \"c\"\nkey_file = \"k\"\n";
        let e = parse(&format!("{base}ca_file = \"x\"")).unwrap_err();
        assert!(e.contains("ca_file"), "{e}");
        let e = parse(&format!("{base}min_version = \"1.1\"")).unwrap_err();
        assert!(e.contains("1.1"), "{e}");
        let e = parse(&format!("{base}client_auth = \"sometimes\"")).unwrap_err();
        assert!(e.contains("sometimes"), "{e}");
        let e = parse(&format!("{base}reload_interval = \"soon\"")).unwrap_err();
        assert!(e.contains("reload_interval"), "{e}");
    }

    #[test]
    fn relative_paths_resolved() {
        let mut cfg = TlsConfig::new(
            "127.0.0.1:1".parse().unwrap(),
            "certs/server.pem".into(),
            "/abs/server.key".into(),
        );
        cfg.client_ca_file = Some("ca.pem".into());
        cfg.resolve_relative_paths(Path::new("/etc/jmxgate"));
        assert_eq!(cfg.cert_file, Path::new("/etc/jmxgate/certs/server.pem"));
        assert_eq!(cfg.key_file, Path::new("/abs/server.key"));
        assert_eq!(
            cfg.client_ca_file.as_deref(),
            Some(Path::new("/etc/jmxgate/ca.pem"))
        );
    }

    struct Files {
        dir: tempfile::TempDir,
    }

    impl Files {
        fn new() -> Files {
            Files {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn write(&self, name: &str, text: &str) -> PathBuf {
            let p = self.dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }

    fn self_signed(cn: &str) -> (String, String) {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn config(cert: PathBuf, key: PathBuf) -> TlsConfig {
        TlsConfig::new("127.0.0.1:0".parse().unwrap(), cert, key)
    }

    #[test]
    fn builds_with_and_without_client_ca() {
        let f = Files::new();
        let (cert, key) = self_signed("server");
        let mut cfg = config(f.write("c.pem", &cert), f.write("k.pem", &key));
        let sc = server_config(&cfg).unwrap();
        assert_eq!(sc.alpn_protocols, vec![b"http/1.1".to_vec()]);
        cfg.client_ca_file = Some(f.write("ca.pem", &cert));
        cfg.client_auth = ClientAuth::Required;
        server_config(&cfg).unwrap();
    }

    #[test]
    fn errors_name_the_file() {
        let f = Files::new();
        let (cert, key) = self_signed("server");
        let (_, other_key) = self_signed("other");
        let cert_path = f.write("c.pem", &cert);
        let key_path = f.write("k.pem", &key);

        let missing = f.dir.path().join("missing.pem");
        let e = server_config(&config(missing.clone(), key_path.clone())).unwrap_err();
        assert!(
            e.starts_with(&format!("cert_file {}: ", missing.display())),
            "{e}"
        );

        let e = server_config(&config(key_path.clone(), key_path.clone())).unwrap_err();
        assert_eq!(
            e,
            format!("cert_file {}: no certificate found", key_path.display())
        );

        let e = server_config(&config(cert_path.clone(), cert_path.clone())).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "key_file {}: no private key found",
                cert_path.display()
            )),
            "{e}"
        );

        let other = f.write("other.key", &other_key);
        let e = server_config(&config(cert_path.clone(), other.clone())).unwrap_err();
        assert_eq!(
            e,
            format!(
                "key_file {}: does not match the certificate in {}",
                other.display(),
                cert_path.display()
            )
        );

        let garbage = f.write(
            "garbage.pem",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        );
        let e = server_config(&config(garbage.clone(), key_path.clone())).unwrap_err();
        assert!(
            e.starts_with(&format!("cert_file {}: certificate #1", garbage.display())),
            "{e}"
        );

        let mut cfg = config(cert_path.clone(), key_path.clone());
        cfg.client_auth = ClientAuth::Required;
        let e = server_config(&cfg).unwrap_err();
        assert!(e.contains("client_ca_file"), "{e}");

        let empty_ca = f.write("empty.pem", "");
        cfg.client_ca_file = Some(empty_ca.clone());
        let e = server_config(&cfg).unwrap_err();
        assert_eq!(
            e,
            format!(
                "client_ca_file {}: no certificate found",
                empty_ca.display()
            )
        );
    }
}
