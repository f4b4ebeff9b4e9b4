//! Bearer tokens from a real OpenID provider (`oidc-provider` from npm,
//! tests/clients/oidc/provider.mjs) over HTTPS with a CA made here: keys
//! found by discovery, fetched while the gateway runs, rotated without a
//! restart, kept while the provider is down; tokens for another audience,
//! expired ones and ones signed by an unpublished key refused.

use crate::common;
use crate::oidc_provider as oidc;

use std::time::{Duration, Instant};

use common::{eventually, shared_agents, targets_toml, Gateway, GatewayProcess, TestPki};
use oidc::{available, token, Provider};
use serde_json::json;

const NAME: &str = "/jolokia/targets/alpha/read/jmxgate.test:type=Types/Name";
/// Short-lived tokens, so that one can expire within the test.
const TOKEN_TTL_SECS: u64 = oidc::TOKEN_TTL_SECS;

fn kid_of(token: &str) -> String {
    jsonwebtoken::decode_header(token).unwrap().kid.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_from_a_real_provider_through_key_rotation_and_outage() {
    if !available() {
        return;
    }
    let pki = TestPki::new("oidc");
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider_http = reqwest::Client::builder()
        .tls_certs_only([
            reqwest::Certificate::from_pem(&std::fs::read(pki.ca_file()).unwrap()).unwrap(),
        ])
        .build()
        .unwrap();

    // The gateway starts while the provider is not there yet.
    let port = common::free_port();
    let issuer = format!("https://127.0.0.1:{port}");
    let [a, ..] = shared_agents();
    let config = format!(
        "auth = [\"bearer\"]\n{}[auth.bearer]\nissuer = \"{issuer}\"\ndiscovery = true\n\
         ca_file = \"{}\"\naudience = \"urn:jmxgate\"\nleeway = \"1s\"\nroles_claim = \"realm_access.roles\"\n\n\
         [auth.bearer.role_map]\n\"jmx-admin\" = [\"ops\"]\n\n\
         [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n",
        targets_toml(&[a]),
        pki.ca_file().display()
    );
    let gateway_started = Instant::now();
    let gw = Gateway::start(&config).await;
    let call = |token: String| {
        let req = gw.http.get(gw.url(NAME)).bearer_auth(token);
        async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    assert!(
        gw.gateway.bearer_unready().is_some(),
        "not ready before the provider's keys are fetched"
    );
    let mut provider = Provider::start(&pki, &jwks, port);
    assert_eq!(provider.issuer, issuer);
    // Accepted once the keys arrive (a retry after the failed first fetch,
    // or an unknown-kid fetch, whichever comes first); fresh tokens, as
    // these live a few seconds.
    let first = eventually("a token accepted", Duration::from_secs(40), || {
        let (http, issuer) = (provider_http.clone(), provider.issuer.clone());
        let gw_http = gw.http.clone();
        let url = gw.url(NAME);
        async move {
            let t = token(&http, &issuer, "urn:jmxgate").await;
            let resp = gw_http.get(url).bearer_auth(&t).send().await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            (status == 200 && body.contains("\"value\":\"alpha\""))
                .then_some(t)
                .ok_or(format!("{status} {body}"))
        }
    })
    .await;
    assert!(gw.gateway.bearer_unready().is_none());

    // Another audience, an unpublished key: 401 invalid_token.
    let other = token(&provider_http, &provider.issuer, "urn:other").await;
    assert_eq!(call(other).await.0, 401);
    let forged = {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some("never-published".into());
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 300;
        jsonwebtoken::encode(
            &header,
            &json!({"iss": issuer, "aud": "urn:jmxgate", "sub": "mallory", "exp": exp, "realm_access": {"roles": ["jmx-admin"]}}),
            &jsonwebtoken::EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap()
    };
    assert_eq!(call(forged).await.0, 401);
    // Expired: the provider's tokens live a few seconds.
    let expiring = token(&provider_http, &provider.issuer, "urn:jmxgate").await;
    assert_eq!(call(expiring.clone()).await.0, 200);
    tokio::time::sleep(Duration::from_secs(TOKEN_TTL_SECS + 2)).await;
    assert_eq!(call(expiring).await.0, 401, "expired");

    // Key rotation: the provider restarts with a new signing key; the
    // gateway fetches it when a token names it, without a restart.
    let old_kid = kid_of(&first);
    drop(provider);
    std::fs::remove_file(&jwks).unwrap();
    provider = Provider::start(&pki, &jwks, port);
    let probe = token(&provider_http, &provider.issuer, "urn:jmxgate").await;
    assert_ne!(kid_of(&probe), old_kid, "a new key signs");
    // Unknown-kid fetches are at most one per 10 s.
    let since_start = gateway_started.elapsed();
    if since_start < Duration::from_secs(11) {
        tokio::time::sleep(Duration::from_secs(11) - since_start).await;
    }
    let rotated = eventually("the rotated key accepted", Duration::from_secs(30), || {
        let (http, issuer) = (provider_http.clone(), provider.issuer.clone());
        let gw_http = gw.http.clone();
        let url = gw.url(NAME);
        async move {
            let t = token(&http, &issuer, "urn:jmxgate").await;
            let status = gw_http
                .get(url)
                .bearer_auth(&t)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            (status == 200).then_some(t).ok_or(format!("{status}"))
        }
    })
    .await;
    assert_ne!(kid_of(&rotated), old_kid);

    // The provider goes away: the cached keys keep working.
    let port = provider.port();
    let fresh = token(&provider_http, &provider.issuer, "urn:jmxgate").await;
    drop(provider);
    let (status, _) = call(fresh.clone()).await;
    assert_eq!(status, 200, "cached keys while the provider is down");
    // A configuration reload then builds a new verifier: it starts from
    // the keys the old one had.
    let text = format!("[server]\nlisten = \"127.0.0.1:0\"\n{config}");
    let reloaded = jmxgate::Config::parse(&text)
        .and_then(|c| c.validate())
        .unwrap();
    gw.gateway.reload(&reloaded).unwrap();
    let (status, _) = call(fresh).await;
    assert_eq!(
        status, 200,
        "cached keys after a reload while the provider is down"
    );
    // And comes back with the same key.
    let provider = Provider::start(&pki, &jwks, port);
    let again = token(&provider_http, &provider.issuer, "urn:jmxgate").await;
    assert_eq!(kid_of(&again), kid_of(&rotated));
    assert_eq!(call(again).await.0, 200);
}

/// `jmxgate serve` itself, not a gateway built in the test: the provider's
/// keys are fetched at start-up (ready before any token arrives) and
/// refreshed every `keys_refresh`, so a key the provider removed stops
/// working within that time.
#[tokio::test(flavor = "multi_thread")]
async fn the_real_binary_fetches_and_refreshes_the_providers_keys() {
    if !available() {
        return;
    }
    let pki = TestPki::new("oidc-serve");
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider_http = reqwest::Client::builder()
        .tls_certs_only([
            reqwest::Certificate::from_pem(&std::fs::read(pki.ca_file()).unwrap()).unwrap(),
        ])
        .build()
        .unwrap();
    // Tokens that outlive the test: only the key's removal may end them.
    let provider = Provider::start_with_ttl(&pki, &jwks, 0, 300);
    let port = provider.port();
    let admin = common::free_port();
    let [a, ..] = shared_agents();
    let config = common::gateway_toml(
        dir.path(),
        &format!(
            "auth = [\"bearer\"]\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n{}\
             [auth.bearer]\nissuer = \"{}\"\ndiscovery = true\nkeys_refresh = \"10s\"\n\
             ca_file = \"{}\"\naudience = \"urn:jmxgate\"\nroles_claim = \"realm_access.roles\"\n\n\
             [auth.bearer.role_map]\n\"jmx-admin\" = [\"ops\"]\n\n\
             [[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n",
            targets_toml(&[a]),
            provider.issuer,
            pki.ca_file().display()
        ),
    );
    let gateway = GatewayProcess::start(&config, "info");
    let http = common::http_client();
    // Ready with no token ever sent: the keys were fetched at start-up.
    let ready = format!("http://127.0.0.1:{admin}/readyz");
    eventually("/readyz says ready", Duration::from_secs(20), || {
        let (http, ready) = (http.clone(), ready.clone());
        async move {
            let r = http.get(&ready).send().await.map_err(|e| e.to_string())?;
            let status = r.status().as_u16();
            let body = r.text().await.unwrap_or_default();
            (status == 200)
                .then_some(())
                .ok_or(format!("{status} {body}"))
        }
    })
    .await;
    let url = format!("http://{}{NAME}", gateway.addr);
    let status = |token: String| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            http.get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let old = token(&provider_http, &provider.issuer, "urn:jmxgate").await;
    assert_eq!(status(old.clone()).await, 200);

    // The provider drops that key for a new one.
    drop(provider);
    std::fs::remove_file(&jwks).unwrap();
    let provider = Provider::start_with_ttl(&pki, &jwks, port, 300);
    let new = token(&provider_http, &provider.issuer, "urn:jmxgate").await;
    assert_ne!(kid_of(&new), kid_of(&old));
    let removed = Instant::now();
    eventually(
        "the removed key refused",
        Duration::from_secs(25),
        || async {
            (status(old.clone()).await == 401)
                .then_some(())
                .ok_or("still accepted".to_string())
        },
    )
    .await;
    // Within one refresh (and the time to fetch), never at the next
    // unknown-kid miss: the old kid is still in the cached set until then.
    assert!(
        removed.elapsed() < Duration::from_secs(16),
        "refused only after {:?}",
        removed.elapsed()
    );
    assert_eq!(status(new).await, 200);
    drop(gateway);
}
