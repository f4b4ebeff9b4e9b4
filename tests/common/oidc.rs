//! A real OpenID provider for the tests (`oidc-provider` from npm,
//! tests/clients/oidc/provider.mjs) over HTTPS with a CA made in the test.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::common::TestPki;

/// Short-lived tokens, so that one can expire within a test.
pub const TOKEN_TTL_SECS: u64 = 4;

pub fn oidc_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/oidc")
}

/// Whether the provider's packages are here; outside CI a missing one
/// skips the test, in CI it fails it.
pub fn available() -> bool {
    if oidc_dir().join("node_modules/oidc-provider").is_dir() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "tests/clients/oidc/node_modules is missing: run scripts/install-deps.sh"
    );
    eprintln!("SKIPPED: tests/clients/oidc/node_modules is missing (scripts/install-deps.sh)");
    false
}

/// A running provider; dropping it closes its stdin, which stops it.
pub struct Provider {
    pub issuer: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Provider {
    /// Starts on `port` (0: any) with the signing keys in `jwks` (made
    /// there when the file is missing).
    pub fn start(pki: &TestPki, jwks: &Path, port: u16) -> Provider {
        Provider::start_with_ttl(pki, jwks, port, TOKEN_TTL_SECS)
    }

    /// The same, its tokens living `ttl` seconds.
    pub fn start_with_ttl(pki: &TestPki, jwks: &Path, port: u16, ttl: u64) -> Provider {
        Provider::start_with(pki, jwks, port, ttl, &[])
    }

    /// The same, with more of provider.mjs's environment (its console
    /// client, the people who sign in).
    pub fn start_with(
        pki: &TestPki,
        jwks: &Path,
        port: u16,
        ttl: u64,
        env: &[(&str, &str)],
    ) -> Provider {
        let (cert, key) = pki.server_cert("oidc");
        let mut child = Command::new("node")
            .arg(oidc_dir().join("provider.mjs"))
            .current_dir(oidc_dir())
            .env("OIDC_PORT", port.to_string())
            .env("OIDC_TLS_CERT", cert)
            .env("OIDC_TLS_KEY", key)
            .env("OIDC_JWKS", jwks)
            .env("OIDC_TOKEN_TTL", ttl.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(issuer) = line.strip_prefix("READY ") {
                    let _ = tx.send(issuer.trim().to_string());
                }
            }
        });
        // Node loads oidc-provider in seconds, but a full suite's JVMs can
        // make that take over 30 s on a busy machine: a generous deadline.
        let issuer = rx
            .recv_timeout(Duration::from_secs(180))
            .expect("the provider said READY");
        Provider {
            issuer,
            stdin: child.stdin.take(),
            child,
        }
    }

    pub fn port(&self) -> u16 {
        url::Url::parse(&self.issuer).unwrap().port().unwrap()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// An access token from the provider for `resource` (client credentials).
pub async fn token(http: &reqwest::Client, issuer: &str, resource: &str) -> String {
    let resp = http
        .post(format!("{issuer}/token"))
        .basic_auth("jmxgate-test", Some("test-secret"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=client_credentials&resource={}&scope=jolokia",
            resource.replace(':', "%3A")
        ))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert!(status.is_success(), "token request: {status} {body}");
    body["access_token"].as_str().unwrap().to_string()
}
