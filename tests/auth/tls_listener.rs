//! The HTTPS listener with real TLS: client certificates (valid, missing,
//! expired, from another CA), certificate reload while serving, and slow
//! clients not holding up others.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use jmxgate::tls::{
    fingerprint_sha256, principal_from_cert, serve, CertPrincipal, ClientAuth, ReloadingTls,
    TlsConfig, TlsConnectInfo, TlsListener, TlsVersion,
};
use rcgen::{CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A CA made for one test.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key.
struct Leaf {
    cert: CertificateDer<'static>,
    cert_pem: String,
    key: KeyPair,
}

impl Leaf {
    fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.serialize_der().into())
    }
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} CA"));
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Ca { issuer }
    }

    fn leaf(&self, cn: &str, sans: &[&str], expired: bool) -> Leaf {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            key,
        }
    }

    fn server_leaf(&self) -> Leaf {
        self.leaf("server", &["127.0.0.1", "localhost"], false)
    }

    fn client_leaf(&self, cn: &str) -> Leaf {
        self.leaf(cn, &[], false)
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }
}

/// Writes atomically (temp file + rename), as deployment tools do.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

struct Server {
    addr: SocketAddr,
    tls: Arc<ReloadingTls>,
    cert_file: PathBuf,
    key_file: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// Serves a handler that describes the connection, e.g.
    /// `remote=127.0.0.1:1234 addr=127.0.0.1:1234 cn=alice fp=ab12…`.
    async fn start(
        server_ca: &Ca,
        client_ca: Option<&Ca>,
        auth: ClientAuth,
        min_version: Option<TlsVersion>,
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let leaf = server_ca.server_leaf();
        let cert_file = dir.path().join("server.pem");
        let key_file = dir.path().join("server.key");
        std::fs::write(&cert_file, &leaf.cert_pem).unwrap();
        std::fs::write(&key_file, leaf.key.serialize_pem()).unwrap();
        let mut cfg = TlsConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "server.pem".into(),
            "server.key".into(),
        );
        if let Some(ca) = client_ca {
            std::fs::write(dir.path().join("clients.pem"), ca.issuer.pem()).unwrap();
            cfg.client_ca_file = Some("clients.pem".into());
        }
        cfg.client_auth = auth;
        cfg.min_version = min_version;
        cfg.resolve_relative_paths(dir.path());

        let tls = Arc::new(ReloadingTls::new(cfg).unwrap());
        let listener = TlsListener::bind(tls.clone()).await.unwrap();
        let addr = axum::serve::Listener::local_addr(&listener).unwrap();
        assert_ne!(addr.port(), 0);
        let router = Router::new().route("/", get(describe));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, router, async {
            let _ = stopped.await;
        }));
        Server {
            addr,
            tls,
            cert_file,
            key_file,
            _dir: dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.addr.port())
    }

    async fn get(&self, client: &reqwest::Client) -> Result<String, reqwest::Error> {
        client
            .get(self.url())
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let result = tokio::time::timeout(Duration::from_secs(10), self.task.take().unwrap())
            .await
            .expect("graceful shutdown");
        result.unwrap().unwrap();
    }
}

async fn describe(
    ConnectInfo(info): ConnectInfo<TlsConnectInfo>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
) -> String {
    let (cn, fp) = match info.client_certificate() {
        Some(c) => (
            principal_from_cert(c, CertPrincipal::Cn).unwrap_or_default(),
            fingerprint_sha256(c),
        ),
        None => ("-".to_string(), "-".to_string()),
    };
    format!("remote={} addr={addr} cn={cn} fp={fp}", info.remote)
}

fn client_config(
    trust: &Ca,
    identity: Option<&Leaf>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trust.der()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots);
    match identity {
        Some(leaf) => builder
            .with_client_auth_cert(vec![leaf.cert.clone()], leaf.key_der())
            .unwrap(),
        None => builder.with_no_client_auth(),
    }
}

fn client(trust: &Ca, identity: Option<&Leaf>) -> reqwest::Client {
    client_with(client_config(trust, identity, rustls::ALL_VERSIONS))
}

fn client_with(tls: rustls::ClientConfig) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The error with all its causes, to see which TLS alert ended it.
fn causes(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

async fn refused(server: &Server, client: &reqwest::Client, alert: &str) {
    let e = server.get(client).await.unwrap_err();
    let text = causes(&e);
    assert!(text.contains(alert), "expected {alert}: {text}");
}

#[tokio::test]
async fn valid_client_certificate_reaches_the_handler() {
    let server_ca = Ca::new("server");
    let client_ca = Ca::new("clients");
    let server = Server::start(&server_ca, Some(&client_ca), ClientAuth::Required, None).await;
    let alice = client_ca.client_leaf("alice");

    let body = server.get(&client(&server_ca, Some(&alice))).await.unwrap();
    let remote = body
        .strip_prefix("remote=")
        .and_then(|b| b.split_once(' '))
        .unwrap()
        .0;
    assert!(remote.starts_with("127.0.0.1:"), "{body}");
    assert!(body.contains(&format!("addr={remote} ")), "{body}");
    assert!(body.contains(" cn=alice "), "{body}");
    assert!(
        body.ends_with(&format!(" fp={}", fingerprint_sha256(&alice.cert))),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn optional_client_auth_lets_clients_without_certificate_in() {
    let server_ca = Ca::new("server");
    let client_ca = Ca::new("clients");
    let server = Server::start(&server_ca, Some(&client_ca), ClientAuth::Optional, None).await;

    let body = server.get(&client(&server_ca, None)).await.unwrap();
    assert!(body.ends_with(" cn=- fp=-"), "{body}");

    // A certificate that is presented is still checked and used.
    let bob = client_ca.client_leaf("bob");
    let body = server.get(&client(&server_ca, Some(&bob))).await.unwrap();
    assert!(body.contains(" cn=bob "), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn required_client_auth_refuses_clients_without_certificate() {
    let server_ca = Ca::new("server");
    let client_ca = Ca::new("clients");
    let server = Server::start(&server_ca, Some(&client_ca), ClientAuth::Required, None).await;
    refused(&server, &client(&server_ca, None), "CertificateRequired").await;
    server.stop().await;
}

#[tokio::test]
async fn expired_or_foreign_client_certificates_are_refused() {
    let server_ca = Ca::new("server");
    let client_ca = Ca::new("clients");
    let other_ca = Ca::new("other");
    // Optional: no certificate would be fine, a bad one is not.
    let server = Server::start(&server_ca, Some(&client_ca), ClientAuth::Optional, None).await;

    let expired = client_ca.leaf("old", &[], true);
    refused(
        &server,
        &client(&server_ca, Some(&expired)),
        "CertificateExpired",
    )
    .await;

    let stranger = other_ca.client_leaf("alice");
    refused(&server, &client(&server_ca, Some(&stranger)), "UnknownCA").await;

    // The listener is still fine for everyone else.
    let body = server.get(&client(&server_ca, None)).await.unwrap();
    assert!(body.ends_with(" cn=- fp=-"), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn without_client_ca_no_certificate_is_asked_for() {
    let server_ca = Ca::new("server");
    let server = Server::start(&server_ca, None, ClientAuth::Optional, None).await;
    let carol = server_ca.client_leaf("carol");
    let body = server.get(&client(&server_ca, Some(&carol))).await.unwrap();
    assert!(body.ends_with(" cn=- fp=-"), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn min_version_1_3_refuses_tls_1_2() {
    let server_ca = Ca::new("server");
    let server = Server::start(
        &server_ca,
        None,
        ClientAuth::Optional,
        Some(TlsVersion::Tls13),
    )
    .await;
    let tls12 = client_with(client_config(&server_ca, None, &[&rustls::version::TLS12]));
    refused(&server, &tls12, "ProtocolVersion").await;
    server.get(&client(&server_ca, None)).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn replaced_certificate_is_used_for_new_connections() {
    let old_ca = Ca::new("old");
    let new_ca = Ca::new("new");
    let server = Server::start(&old_ca, None, ClientAuth::Optional, None).await;

    // One client keeps its connection across the reload.
    let kept = client(&old_ca, None);
    server.get(&kept).await.unwrap();
    assert_eq!(server.tls.reload_if_changed(), Ok(false));

    let leaf = new_ca.server_leaf();
    replace(&server.key_file, &leaf.key.serialize_pem());
    replace(&server.cert_file, &leaf.cert_pem);
    assert_eq!(server.tls.reload_if_changed(), Ok(true));
    assert_eq!(server.tls.reload_if_changed(), Ok(false));

    server.get(&client(&new_ca, None)).await.unwrap();
    refused(&server, &client(&old_ca, None), "UnknownIssuer").await;
    server.get(&kept).await.unwrap();

    // A broken replacement: the error names the file, the last good
    // certificate stays in use.
    replace(&server.cert_file, "not a certificate\n");
    let e = server.tls.reload_if_changed().unwrap_err();
    assert_eq!(
        e,
        format!(
            "cert_file {}: no certificate found",
            server.cert_file.display()
        )
    );
    server.get(&client(&new_ca, None)).await.unwrap();

    // A certificate that does not go with the key.
    replace(&server.cert_file, &old_ca.server_leaf().cert_pem);
    let e = server.tls.reload_if_changed().unwrap_err();
    assert_eq!(
        e,
        format!(
            "key_file {}: does not match the certificate in {}",
            server.key_file.display(),
            server.cert_file.display()
        )
    );
    assert!(server.tls.reload().unwrap_err().starts_with("key_file "));
    server.get(&client(&new_ca, None)).await.unwrap();

    // Fixed: picked up again.
    replace(&server.cert_file, &leaf.cert_pem);
    assert_eq!(server.tls.reload_if_changed(), Ok(true));
    server.get(&client(&new_ca, None)).await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn watch_picks_up_changes() {
    let old_ca = Ca::new("old");
    let new_ca = Ca::new("new");
    let dir = tempfile::tempdir().unwrap();
    let leaf = old_ca.server_leaf();
    let (cert_file, key_file) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    std::fs::write(&cert_file, &leaf.cert_pem).unwrap();
    std::fs::write(&key_file, leaf.key.serialize_pem()).unwrap();
    let mut cfg = TlsConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        cert_file.clone(),
        key_file.clone(),
    );
    cfg.reload_interval = Duration::from_millis(50);
    let tls = Arc::new(ReloadingTls::new(cfg).unwrap());
    let watcher = tokio::spawn(tls.clone().watch());
    let before = tls.current();

    let leaf = new_ca.server_leaf();
    replace(&key_file, &leaf.key.serialize_pem());
    replace(&cert_file, &leaf.cert_pem);
    crate::common::eventually(
        "the new certificate is loaded",
        Duration::from_secs(30),
        || async {
            if Arc::ptr_eq(&before, &tls.current()) {
                Err("the old one is still in use".to_string())
            } else {
                Ok(())
            }
        },
    )
    .await;
    watcher.abort();
}

#[tokio::test]
async fn slow_clients_do_not_block_others() {
    let server_ca = Ca::new("server");
    let server = Server::start(&server_ca, None, ClientAuth::Optional, None).await;
    // Connections that never start a handshake, and one that sends junk.
    let mut idle = Vec::new();
    for _ in 0..5 {
        idle.push(tokio::net::TcpStream::connect(server.addr).await.unwrap());
    }
    let mut junk = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut junk, b"GET / HTTP/1.1\r\n\r\n")
        .await
        .unwrap();

    let started = std::time::Instant::now();
    server.get(&client(&server_ca, None)).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(idle);
    server.stop().await;
}
