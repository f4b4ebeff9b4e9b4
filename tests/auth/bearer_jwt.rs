//! Bearer JWT verification with real keys generated per run: an HS256
//! secret, RSA 2048 (openssl CLI), EC P-256 (rcgen), and a JWKS built from
//! the public keys.

use jmxgate::pipeline::authenticate::bearer;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bearer::{Bearer, BearerConfig, BearerError, BearerErrorKind, BearerIdentity};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};
use jsonwebtoken::{encode, Algorithm, DecodingKey, EncodingKey, Header};
use serde_json::{json, Value};

const NOW: u64 = 1_700_000_000;
const SECRET: &[u8] = b"an-hs256-test-secret-of-more-than-32-bytes";

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

struct Pems {
    private: String,
    public: String,
}

struct Keys {
    rsa: Pems,
    rsa_other: Pems,
    ec: Pems,
    ec_other: Pems,
}

/// Key material shared by all tests (RSA generation is slow-ish); every
/// test writes what it needs into its own temporary directory.
fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys {
        rsa: openssl_rsa(),
        rsa_other: openssl_rsa(),
        ec: rcgen_ec(&rcgen::PKCS_ECDSA_P256_SHA256),
        ec_other: rcgen_ec(&rcgen::PKCS_ECDSA_P256_SHA256),
    })
}

fn openssl_rsa() -> Pems {
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("rsa.pem");
    let public = dir.path().join("rsa.pub.pem");
    let run = |args: &[&str]| {
        let out = Command::new("/usr/bin/openssl")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        private.to_str().unwrap(),
    ]);
    run(&[
        "pkey",
        "-in",
        private.to_str().unwrap(),
        "-pubout",
        "-out",
        public.to_str().unwrap(),
    ]);
    Pems {
        private: std::fs::read_to_string(private).unwrap(),
        public: std::fs::read_to_string(public).unwrap(),
    }
}

fn rcgen_ec(alg: &'static rcgen::SignatureAlgorithm) -> Pems {
    let pair = rcgen::KeyPair::generate_for(alg).unwrap();
    Pems {
        private: pair.serialize_pem(),
        public: pair.public_key_pem(),
    }
}

/// A temporary directory with helpers to put key files in.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

fn hs256_config(files: &Files) -> BearerConfig {
    let mut secret = SECRET.to_vec();
    secret.push(b'\n');
    BearerConfig {
        hs256_secret_file: Some(files.write("secret", secret)),
        ..BearerConfig::default()
    }
}

fn rs256_config(files: &Files) -> BearerConfig {
    BearerConfig {
        rs256_public_key_file: Some(files.write("rsa.pub.pem", &keys().rsa.public)),
        ..BearerConfig::default()
    }
}

fn es256_config(files: &Files) -> BearerConfig {
    BearerConfig {
        es256_public_key_file: Some(files.write("ec.pub.pem", &keys().ec.public)),
        ..BearerConfig::default()
    }
}

fn build(config: &BearerConfig) -> Bearer {
    Bearer::from_config(config).unwrap()
}

fn hs256_key(secret: &[u8]) -> EncodingKey {
    EncodingKey::from_secret(secret)
}
fn rsa_key(pems: &Pems) -> EncodingKey {
    EncodingKey::from_rsa_pem(pems.private.as_bytes()).unwrap()
}
fn ec_key(pems: &Pems) -> EncodingKey {
    EncodingKey::from_ec_pem(pems.private.as_bytes()).unwrap()
}

fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).unwrap()
}

fn claims() -> Value {
    json!({"sub": "alice", "exp": NOW + 300, "iat": NOW, "roles": ["reader", "writer"]})
}

fn with(mut base: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

fn b64(v: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(v)
}

fn accept(bearer: &Bearer, token: &str) -> BearerIdentity {
    bearer
        .verify(token, at(NOW))
        .unwrap_or_else(|e| panic!("token refused: {}", e.description()))
}

/// Asserts the refusal, its RFC 6750 code, its kind, and that the log
/// description leaks neither the token nor any of its parts.
#[track_caller]
fn refuse_at(bearer: &Bearer, token: &str, now: u64, kind: BearerErrorKind) -> BearerError {
    let err = match bearer.verify(token, at(now)) {
        Ok(id) => panic!("token accepted: {id:?}"),
        Err(e) => e,
    };
    assert_eq!(err.code(), "invalid_token");
    assert_eq!(err.kind(), kind, "{}", err.description());
    let description = err.description();
    assert!(!description.is_empty());
    if !token.is_empty() {
        assert!(!description.contains(token), "{description}");
    }
    for part in token.split('.').filter(|p| p.len() >= 8) {
        assert!(!description.contains(part), "{description}");
    }
    assert_eq!(err.to_string(), description);
    err
}

#[track_caller]
fn refuse(bearer: &Bearer, token: &str, kind: BearerErrorKind) -> BearerError {
    refuse_at(bearer, token, NOW, kind)
}

/// A JWK for a public PEM key via jsonwebtoken (RSA n/e or EC x/y, base64url).
fn jwk(public_pem: &str, rsa: bool) -> Value {
    let key = if rsa {
        DecodingKey::from_rsa_pem(public_pem.as_bytes()).unwrap()
    } else {
        DecodingKey::from_ec_pem(public_pem.as_bytes()).unwrap()
    };
    let jwk = Jwk::from_decoding_key(&key, None).unwrap();
    match jwk.algorithm {
        AlgorithmParameters::RSA(p) => json!({"kty": "RSA", "n": p.n, "e": p.e}),
        AlgorithmParameters::EllipticCurve(p) => {
            json!({"kty": "EC", "crv": "P-256", "x": p.x, "y": p.y})
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn jwks_config(files: &Files, keys: Vec<Value>) -> BearerConfig {
    BearerConfig {
        jwks_file: Some(files.write("jwks.json", json!({ "keys": keys }).to_string())),
        ..BearerConfig::default()
    }
}

// ---- valid tokens -------------------------------------------------------

#[test]
fn valid_hs256_token() {
    let files = Files::new();
    let bearer = build(&hs256_config(&files));
    let token = sign(Algorithm::HS256, None, &claims(), &hs256_key(SECRET));
    assert_eq!(
        accept(&bearer, &token),
        BearerIdentity {
            principal: "alice".into(),
            issuer: None,
            roles: vec!["reader".into(), "writer".into()],
            expires_at: Some(NOW + 300),
        }
    );
    assert_eq!(bearer.accepted_algorithms(), vec!["HS256"]);
}

#[test]
fn valid_rs256_token() {
    let files = Files::new();
    let bearer = build(&rs256_config(&files));
    let token = sign(Algorithm::RS256, None, &claims(), &rsa_key(&keys().rsa));
    assert_eq!(accept(&bearer, &token).principal, "alice");
    // A PEM key has no kid, so it is a candidate whatever kid a token names.
    let token = sign(
        Algorithm::RS256,
        Some("k1"),
        &claims(),
        &rsa_key(&keys().rsa),
    );
    assert_eq!(accept(&bearer, &token).principal, "alice");
}

#[test]
fn valid_es256_token() {
    let files = Files::new();
    let bearer = build(&es256_config(&files));
    let token = sign(Algorithm::ES256, None, &claims(), &ec_key(&keys().ec));
    assert_eq!(accept(&bearer, &token).principal, "alice");
}

#[test]
fn all_sources_together() {
    let files = Files::new();
    let config = BearerConfig {
        rs256_public_key_file: rs256_config(&files).rs256_public_key_file,
        es256_public_key_file: es256_config(&files).es256_public_key_file,
        ..hs256_config(&files)
    };
    let bearer = build(&config);
    assert_eq!(
        bearer.accepted_algorithms(),
        vec!["HS256", "RS256", "ES256"]
    );
    for token in [
        sign(Algorithm::HS256, None, &claims(), &hs256_key(SECRET)),
        sign(Algorithm::RS256, None, &claims(), &rsa_key(&keys().rsa)),
        sign(Algorithm::ES256, None, &claims(), &ec_key(&keys().ec)),
    ] {
        assert_eq!(accept(&bearer, &token).principal, "alice");
    }
}

// ---- JWKS -----------------------------------------------------------------

#[test]
fn jwks_selects_the_key_by_kid() {
    let files = Files::new();
    let k = keys();
    let bearer = build(&jwks_config(
        &files,
        vec![
            with(
                jwk(&k.rsa.public, true),
                json!({"kid": "rsa-1", "use": "sig", "alg": "RS256"}),
            ),
            with(jwk(&k.rsa_other.public, true), json!({"kid": "rsa-2"})),
            with(
                jwk(&k.ec.public, false),
                json!({"kid": "ec-1", "alg": "ES256"}),
            ),
        ],
    ));
    assert_eq!(bearer.accepted_algorithms(), vec!["RS256", "ES256"]);

    let t = sign(Algorithm::RS256, Some("rsa-1"), &claims(), &rsa_key(&k.rsa));
    assert_eq!(accept(&bearer, &t).principal, "alice");
    let t = sign(
        Algorithm::RS256,
        Some("rsa-2"),
        &claims(),
        &rsa_key(&k.rsa_other),
    );
    assert_eq!(accept(&bearer, &t).principal, "alice");
    let t = sign(Algorithm::ES256, Some("ec-1"), &claims(), &ec_key(&k.ec));
    assert_eq!(accept(&bearer, &t).principal, "alice");

    // The kid picks the key: signed with rsa-2's key but naming rsa-1.
    let t = sign(
        Algorithm::RS256,
        Some("rsa-1"),
        &claims(),
        &rsa_key(&k.rsa_other),
    );
    refuse(&bearer, &t, BearerErrorKind::Signature);
    // A kid of the other family is no candidate.
    let t = sign(Algorithm::RS256, Some("ec-1"), &claims(), &rsa_key(&k.rsa));
    refuse(&bearer, &t, BearerErrorKind::UnknownKey);
    // Unknown kid.
    let t = sign(Algorithm::RS256, Some("rsa-9"), &claims(), &rsa_key(&k.rsa));
    let e = refuse(&bearer, &t, BearerErrorKind::UnknownKey);
    assert!(e.description().contains("rsa-9"), "{}", e.description());
    // No kid, and every key has one.
    let t = sign(Algorithm::RS256, None, &claims(), &rsa_key(&k.rsa));
    refuse(&bearer, &t, BearerErrorKind::UnknownKey);
}

#[test]
fn jwks_keys_without_kid_serve_tokens_without_kid() {
    let files = Files::new();
    let k = keys();
    let bearer = build(&jwks_config(
        &files,
        vec![
            jwk(&k.rsa.public, true),
            with(jwk(&k.rsa_other.public, true), json!({"kid": "named"})),
            jwk(&k.ec.public, false),
        ],
    ));
    let t = sign(Algorithm::RS256, None, &claims(), &rsa_key(&k.rsa));
    assert_eq!(accept(&bearer, &t).principal, "alice");
    let t = sign(Algorithm::ES256, None, &claims(), &ec_key(&k.ec));
    assert_eq!(accept(&bearer, &t).principal, "alice");
    // The named key only serves its kid.
    let t = sign(Algorithm::RS256, None, &claims(), &rsa_key(&k.rsa_other));
    refuse(&bearer, &t, BearerErrorKind::Signature);
    let t = sign(
        Algorithm::RS256,
        Some("named"),
        &claims(),
        &rsa_key(&k.rsa_other),
    );
    assert_eq!(accept(&bearer, &t).principal, "alice");
}

#[test]
fn jwks_skips_keys_it_cannot_use_and_refuses_bad_ones() {
    let files = Files::new();
    let k = keys();
    let p384 = rcgen_ec(&rcgen::PKCS_ECDSA_P384_SHA384);
    let p384_key = DecodingKey::from_ec_pem(p384.public.as_bytes()).unwrap();
    let p384_jwk = match Jwk::from_decoding_key(&p384_key, None).unwrap().algorithm {
        AlgorithmParameters::EllipticCurve(p) => {
            json!({"kty": "EC", "crv": "P-384", "x": p.x, "y": p.y, "kid": "p384"})
        }
        other => panic!("{other:?}"),
    };
    let usable = with(jwk(&k.rsa.public, true), json!({"kid": "ok"}));
    let skipped = vec![
        json!({"kty": "oct", "k": b64(SECRET), "kid": "hmac"}),
        with(
            jwk(&k.rsa_other.public, true),
            json!({"kid": "enc", "use": "enc"}),
        ),
        with(
            jwk(&k.rsa_other.public, true),
            json!({"kid": "ps", "alg": "PS256"}),
        ),
        p384_jwk,
        json!({"kty": "OKP", "crv": "Ed25519", "x": b64([1u8; 32]), "kid": "ed"}),
    ];

    let mut all = skipped.clone();
    all.push(usable);
    let bearer = build(&jwks_config(&files, all));
    let t = sign(Algorithm::RS256, Some("ok"), &claims(), &rsa_key(&k.rsa));
    assert_eq!(accept(&bearer, &t).principal, "alice");
    // The symmetric JWKS key never enables HS256.
    let t = sign(
        Algorithm::HS256,
        Some("hmac"),
        &claims(),
        &hs256_key(SECRET),
    );
    refuse(&bearer, &t, BearerErrorKind::Algorithm);
    let t = sign(
        Algorithm::RS256,
        Some("enc"),
        &claims(),
        &rsa_key(&k.rsa_other),
    );
    refuse(&bearer, &t, BearerErrorKind::UnknownKey);

    let err = Bearer::from_config(&jwks_config(&files, skipped)).unwrap_err();
    assert!(err.contains("no usable RS256/ES256 key"), "{err}");

    let bad = |keys: Vec<Value>| Bearer::from_config(&jwks_config(&files, keys)).unwrap_err();
    let err = bad(vec![with(jwk(&k.rsa.public, true), json!({"d": "AQAB"}))]);
    assert!(err.contains("private key material"), "{err}");
    let err = bad(vec![
        json!({"kty": "RSA", "n": b64([0xffu8; 128]), "e": "AQAB"}),
    ]);
    assert!(err.contains("1024 bits"), "{err}");
    let err = bad(vec![
        json!({"kty": "EC", "crv": "P-256", "x": b64([1u8; 32]), "y": b64([2u8; 32])}),
    ]);
    assert!(err.contains("P-256"), "{err}");
    let err = bad(vec![json!({"kty": "RSA", "n": b64([0xffu8; 256])})]);
    assert!(err.contains("malformed"), "{err}");
    let err = bad(vec![
        with(jwk(&k.rsa.public, true), json!({"kid": "same"})),
        with(jwk(&k.ec.public, false), json!({"kid": "same"})),
    ]);
    assert!(err.contains("more than one key"), "{err}");
    let path = files.write("not-jwks.json", "{\"keys\": 1}");
    let err = Bearer::from_config(&BearerConfig {
        jwks_file: Some(path.clone()),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(
        err.contains(&path.display().to_string()) && err.contains("keys"),
        "{err}"
    );
}

// ---- time -------------------------------------------------------------------

#[test]
fn expiry_with_leeway() {
    let files = Files::new();
    let bearer = build(&hs256_config(&files)); // leeway 30s
    let key = hs256_key(SECRET);
    let token = sign(
        Algorithm::HS256,
        None,
        &with(claims(), json!({"exp": NOW})),
        &key,
    );

    // Within the leeway.
    for now in [NOW - 100, NOW, NOW + 29] {
        assert!(bearer.verify(&token, at(now)).is_ok(), "now {now}");
    }
    // Beyond it.
    for now in [NOW + 30, NOW + 31, NOW + 100_000] {
        let e = refuse_at(&bearer, &token, now, BearerErrorKind::Expired);
        assert!(e.description().contains("expired"), "{}", e.description());
    }

    // A zero leeway is exact.
    let strict = build(&BearerConfig {
        leeway: Duration::ZERO,
        ..hs256_config(&files)
    });
    assert!(strict.verify(&token, at(NOW - 1)).is_ok());
    refuse_at(&strict, &token, NOW, BearerErrorKind::Expired);
}

#[test]
fn not_before_with_leeway() {
    let files = Files::new();
    let bearer = build(&hs256_config(&files));
    let key = hs256_key(SECRET);
    let soon = sign(
        Algorithm::HS256,
        None,
        &with(claims(), json!({"nbf": NOW + 20})),
        &key,
    );
    assert_eq!(accept(&bearer, &soon).principal, "alice");
    let later = sign(
        Algorithm::HS256,
        None,
        &with(claims(), json!({"nbf": NOW + 31})),
        &key,
    );
    let e = refuse(&bearer, &later, BearerErrorKind::NotYetValid);
    assert!(
        e.description().contains("not valid before"),
        "{}",
        e.description()
    );
    assert!(bearer.verify(&later, at(NOW + 1)).is_ok());
}

#[test]
fn exp_is_required_and_numeric() {
    let files = Files::new();
    let bearer = build(&hs256_config(&files));
    let key = hs256_key(SECRET);
    for bad in [
        json!({"exp": null}),
        json!({"exp": "2000000000"}),
        json!({"exp": -5}),
    ] {
        let t = sign(Algorithm::HS256, None, &with(claims(), bad), &key);
        refuse(&bearer, &t, BearerErrorKind::Claims);
    }
    let t = sign(
        Algorithm::HS256,
        None,
        &with(claims(), json!({"nbf": "soon"})),
        &key,
    );
    refuse(&bearer, &t, BearerErrorKind::Claims);
    // Fractional NumericDates are fine.
    let t = sign(
        Algorithm::HS256,
        None,
        &with(claims(), json!({"exp": NOW as f64 + 60.5})),
        &key,
    );
    assert_eq!(accept(&bearer, &t).expires_at, Some(NOW + 60));
}

// ---- issuer and audience ----------------------------------------------------

#[test]
fn audience() {
    let files = Files::new();
    let bearer = build(&BearerConfig {
        audience: Some("jmxgate".into()),
        ..hs256_config(&files)
    });
    let key = hs256_key(SECRET);
    for aud in [json!("jmxgate"), json!(["other", "jmxgate"])] {
        let t = sign(
            Algorithm::HS256,
            None,
            &with(claims(), json!({"aud": aud})),
            &key,
        );
        assert_eq!(accept(&bearer, &t).principal, "alice");
    }
    for aud in [json!("other"), json!(["other"]), json!([]), json!(7)] {
        let t = sign(
            Algorithm::HS256,
            None,
            &with(claims(), json!({"aud": aud})),
            &key,
        );
        refuse(&bearer, &t, BearerErrorKind::Audience);
    }
    let t = sign(Algorithm::HS256, None, &claims(), &key);
    refuse(&bearer, &t, BearerErrorKind::Audience);

    // Without a configured audience, aud is not checked.
    let open = build(&hs256_config(&files));
    let t = sign(
        Algorithm::HS256,
        None,
        &with(claims(), json!({"aud": "x"})),
        &key,
    );
    assert_eq!(accept(&open, &t).principal, "alice");
}

#[test]
fn authorized_parties() {
    let files = Files::new();
    let bearer = build(&BearerConfig {
        authorized_parties: vec!["hawtio".into(), "telegraf".into()],
        ..hs256_config(&files)
    });
    let key = hs256_key(SECRET);
    let signed =
        |extra: serde_json::Value| sign(Algorithm::HS256, None, &with(claims(), extra), &key);
    assert_eq!(
        accept(&bearer, &signed(json!({"azp": "hawtio"}))).principal,
        "alice"
    );
    // client_id (RFC 9068) when there is no azp.
    assert_eq!(
        accept(&bearer, &signed(json!({"client_id": "telegraf"}))).principal,
        "alice"
    );
    refuse(
        &bearer,
        &signed(json!({"azp": "other"})),
        BearerErrorKind::Audience,
    );
    refuse(&bearer, &signed(json!({})), BearerErrorKind::Audience);
    // azp decides when both are there.
    refuse(
        &bearer,
        &signed(json!({"azp": "other", "client_id": "hawtio"})),
        BearerErrorKind::Audience,
    );
}

#[test]
fn issuer() {
    let files = Files::new();
    let bearer = build(&BearerConfig {
        issuer: Some("https://idp.example".into()),
        ..hs256_config(&files)
    });
    let key = hs256_key(SECRET);
    let t = sign(
        Algorithm::HS256,
        None,
        &with(claims(), json!({"iss": "https://idp.example"})),
        &key,
    );
    assert_eq!(accept(&bearer, &t).principal, "alice");
    for iss in [
        json!("https://evil.example"),
        json!(["https://idp.example"]),
        json!(null),
    ] {
        let t = sign(
            Algorithm::HS256,
            None,
            &with(claims(), json!({"iss": iss})),
            &key,
        );
        refuse(&bearer, &t, BearerErrorKind::Issuer);
    }
}

// ---- signatures and algorithms ----------------------------------------------

#[test]
fn signed_with_another_key() {
    let files = Files::new();
    let k = keys();
    let bearer = build(&BearerConfig {
        rs256_public_key_file: rs256_config(&files).rs256_public_key_file,
        es256_public_key_file: es256_config(&files).es256_public_key_file,
        ..hs256_config(&files)
    });
    let other_secret = b"another-hs256-secret-of-more-than-32-bytes";
    for token in [
        sign(Algorithm::HS256, None, &claims(), &hs256_key(other_secret)),
        sign(Algorithm::RS256, None, &claims(), &rsa_key(&k.rsa_other)),
        sign(Algorithm::ES256, None, &claims(), &ec_key(&k.ec_other)),
    ] {
        refuse(&bearer, &token, BearerErrorKind::Signature);
    }

    // Tampered claims, original signature.
    let token = sign(Algorithm::HS256, None, &claims(), &hs256_key(SECRET));
    let parts: Vec<&str> = token.split('.').collect();
    let forged = b64(with(claims(), json!({"sub": "root"})).to_string());
    let tampered = format!("{}.{}.{}", parts[0], forged, parts[2]);
    refuse(&bearer, &tampered, BearerErrorKind::Signature);
    // Signature stripped.
    refuse(
        &bearer,
        &format!("{}.{}.", parts[0], parts[1]),
        BearerErrorKind::Signature,
    );
}

#[test]
fn alg_none_is_refused() {
    let files = Files::new();
    let bearer = build(&BearerConfig {
        rs256_public_key_file: rs256_config(&files).rs256_public_key_file,
        ..hs256_config(&files)
    });
    let payload = b64(claims().to_string());
    for header in [
        json!({"alg": "none"}),
        json!({"alg": "none", "typ": "JWT"}),
        json!({"alg": "None"}),
        json!({"alg": "NONE"}),
        json!({"alg": ""}),
    ] {
        let token = format!("{}.{}.", b64(header.to_string()), payload);
        refuse(&bearer, &token, BearerErrorKind::Algorithm);
    }
    let token = format!("{}.{}", b64(json!({"alg": "none"}).to_string()), payload);
    refuse(&bearer, &token, BearerErrorKind::Malformed);
    let token = format!("{}.{}.", b64(json!({"typ": "JWT"}).to_string()), payload);
    refuse(&bearer, &token, BearerErrorKind::Malformed);
}

#[test]
fn only_algorithms_with_a_configured_key_are_accepted() {
    let files = Files::new();
    let k = keys();
    let rsa_only = build(&rs256_config(&files));
    let ec_only = build(&es256_config(&files));
    let hs_only = build(&hs256_config(&files));

    let es = sign(Algorithm::ES256, None, &claims(), &ec_key(&k.ec));
    let rs = sign(Algorithm::RS256, None, &claims(), &rsa_key(&k.rsa));
    let hs = sign(Algorithm::HS256, None, &claims(), &hs256_key(SECRET));
    refuse(&rsa_only, &es, BearerErrorKind::Algorithm);
    refuse(&rsa_only, &hs, BearerErrorKind::Algorithm);
    refuse(&ec_only, &rs, BearerErrorKind::Algorithm);
    refuse(&hs_only, &rs, BearerErrorKind::Algorithm);

    // Other algorithms of the same families are never accepted, even
    // signed with a configured key.
    let rs512 = sign(Algorithm::RS512, None, &claims(), &rsa_key(&k.rsa));
    let ps256 = sign(Algorithm::PS256, None, &claims(), &rsa_key(&k.rsa));
    let hs512 = sign(Algorithm::HS512, None, &claims(), &hs256_key(SECRET));
    refuse(&rsa_only, &rs512, BearerErrorKind::Algorithm);
    refuse(&rsa_only, &ps256, BearerErrorKind::Algorithm);
    let e = refuse(&hs_only, &hs512, BearerErrorKind::Algorithm);
    assert!(e.description().contains("HS512"), "{}", e.description());
}

#[test]
fn algorithm_confusion_hs256_with_the_rsa_public_key_as_secret() {
    let files = Files::new();
    let public_pem = keys().rsa.public.as_bytes();
    for secret in [public_pem, public_pem.trim_ascii_end()] {
        let token = sign(Algorithm::HS256, None, &claims(), &hs256_key(secret));
        // Only RSA configured: HS256 is not accepted at all.
        let rsa_only = build(&rs256_config(&files));
        refuse(&rsa_only, &token, BearerErrorKind::Algorithm);
        // Same through a JWKS.
        let jwks = build(&jwks_config(&files, vec![jwk(&keys().rsa.public, true)]));
        refuse(&jwks, &token, BearerErrorKind::Algorithm);
        // With an HS256 secret configured too, the RSA key is still never
        // used as an HMAC secret.
        let both = build(&BearerConfig {
            rs256_public_key_file: rs256_config(&files).rs256_public_key_file,
            ..hs256_config(&files)
        });
        refuse(&both, &token, BearerErrorKind::Signature);
    }
}

#[test]
fn garbage_tokens() {
    let files = Files::new();
    let bearer = build(&hs256_config(&files));
    let payload = b64(claims().to_string());
    let good = sign(Algorithm::HS256, None, &claims(), &hs256_key(SECRET));
    let sig = good.rsplit('.').next().unwrap().to_owned();
    let cases: Vec<String> = vec![
        String::new(),
        "garbage".into(),
        "a.b".into(),
        "a.b.c".into(),
        "..".into(),
        "a.b.c.d.e".into(),
        format!("{good}.{sig}"),
        "not a token at all".into(),
        format!("{good}\n"),
        format!("{good}=="),
        "ÿÿÿ.ÿÿÿ.ÿÿÿ".into(),
        format!("{}.{payload}.{sig}", b64("not json")),
        format!("{}.{payload}.{sig}", b64("[1,2]")),
        format!("{}.{payload}.{sig}", b64(json!({"alg": 256}).to_string())),
        format!(
            "{}.{payload}.{sig}",
            b64(json!({"alg": "HS256", "kid": 1}).to_string())
        ),
        format!(
            "{}.{payload}.{sig}",
            b64(json!({"alg": "HS256", "crit": ["b64"], "b64": false}).to_string())
        ),
        "x".repeat(bearer::MAX_TOKEN_LEN + 1),
    ];
    for token in &cases {
        refuse(&bearer, token, BearerErrorKind::Malformed);
    }

    // A valid signature over claims that are not JSON / not an object.
    let header = b64(json!({"alg": "HS256"}).to_string());
    for body in ["not json", "[1,2,3]", "\"alice\""] {
        let message = format!("{header}.{}", b64(body));
        let signature =
            jsonwebtoken::crypto::sign(message.as_bytes(), &hs256_key(SECRET), Algorithm::HS256)
                .unwrap();
        refuse(
            &bearer,
            &format!("{message}.{signature}"),
            BearerErrorKind::Malformed,
        );
    }
}

// ---- claims -------------------------------------------------------------------

#[test]
fn roles_from_array_string_and_nested_path() {
    let files = Files::new();
    let key = hs256_key(SECRET);
    let bearer = build(&hs256_config(&files));
    let roles =
        |bearer: &Bearer, c: Value| accept(bearer, &sign(Algorithm::HS256, None, &c, &key)).roles;

    assert_eq!(roles(&bearer, claims()), ["reader", "writer"]);
    assert_eq!(
        roles(
            &bearer,
            with(claims(), json!({"roles": " reader  writer\tadmin reader"}))
        ),
        ["reader", "writer", "admin"]
    );
    assert_eq!(
        roles(
            &bearer,
            with(claims(), json!({"roles": ["a", "", "a", "b"]}))
        ),
        ["a", "b"]
    );
    assert!(roles(&bearer, with(claims(), json!({"roles": null}))).is_empty());
    assert!(roles(&bearer, with(claims(), json!({"roles": ""}))).is_empty());
    for bad in [
        json!({"roles": 5}),
        json!({"roles": ["a", 1]}),
        json!({"roles": {"a": 1}}),
    ] {
        let t = sign(Algorithm::HS256, None, &with(claims(), bad), &key);
        refuse(&bearer, &t, BearerErrorKind::Claims);
    }

    let nested = build(&BearerConfig {
        roles_claim: "realm_access.roles".into(),
        ..hs256_config(&files)
    });
    let c = with(
        claims(),
        json!({"realm_access": {"roles": ["jolokia-read"]}}),
    );
    assert_eq!(roles(&nested, c), ["jolokia-read"]);
    let c = with(claims(), json!({"realm_access": {"roles": "x y"}}));
    assert_eq!(roles(&nested, c), ["x", "y"]);
    assert!(roles(&nested, with(claims(), json!({"realm_access": {}}))).is_empty());
    assert!(roles(&nested, with(claims(), json!({"realm_access": "x"}))).is_empty());

    let namespaced = build(&BearerConfig {
        roles_claim: "https://jmxgate.example/roles".into(),
        ..hs256_config(&files)
    });
    let c = with(claims(), json!({"https://jmxgate.example/roles": ["ops"]}));
    assert_eq!(roles(&namespaced, c), ["ops"]);

    // A provider's role names mapped to the gateway's; unmapped ones give
    // no role.
    let mapped = build(&BearerConfig {
        roles_claim: "realm_access.roles".into(),
        role_map: [
            (
                "jmx-admin".to_string(),
                vec!["ops".to_string(), "audit".to_string()],
            ),
            ("jmx-viewer".to_string(), vec!["readers".to_string()]),
        ]
        .into_iter()
        .collect(),
        ..hs256_config(&files)
    });
    let c = with(
        claims(),
        json!({"realm_access": {"roles": ["jmx-viewer", "offline_access", "jmx-admin"]}}),
    );
    assert_eq!(roles(&mapped, c), ["ops", "audit", "readers"]);
    let c = with(
        claims(),
        json!({"realm_access": {"roles": ["offline_access"]}}),
    );
    assert!(roles(&mapped, c).is_empty());
}

#[test]
fn principal_claim() {
    let files = Files::new();
    let key = hs256_key(SECRET);
    let bearer = build(&hs256_config(&files));
    for bad in [
        json!({"sub": null}),
        json!({"sub": ""}),
        json!({"sub": 42}),
        json!({"sub": "ali\nce"}),
    ] {
        let t = sign(Algorithm::HS256, None, &with(claims(), bad), &key);
        let e = refuse(&bearer, &t, BearerErrorKind::Claims);
        assert!(e.description().contains("principal"), "{}", e.description());
    }
    // jsonwebtoken itself cannot decode claims whose `sub` is an array or
    // object (its own `sub` check derails the JSON parser): still refused.
    for bad in [json!({"sub": ["alice"]}), json!({"sub": {"name": "alice"}})] {
        let t = sign(Algorithm::HS256, None, &with(claims(), bad), &key);
        refuse(&bearer, &t, BearerErrorKind::Malformed);
    }

    let custom = build(&BearerConfig {
        principal_claim: "preferred_username".into(),
        ..hs256_config(&files)
    });
    let c = with(claims(), json!({"preferred_username": "bob"}));
    assert_eq!(
        accept(&custom, &sign(Algorithm::HS256, None, &c, &key)).principal,
        "bob"
    );
    refuse(
        &custom,
        &sign(Algorithm::HS256, None, &claims(), &key),
        BearerErrorKind::Claims,
    );

    let nested = build(&BearerConfig {
        principal_claim: "user.name".into(),
        ..hs256_config(&files)
    });
    let c = with(claims(), json!({"user": {"name": "carol"}}));
    assert_eq!(
        accept(&nested, &sign(Algorithm::HS256, None, &c, &key)).principal,
        "carol"
    );
}

// ---- configuration ----------------------------------------------------------

#[test]
fn config_from_toml() {
    let config: BearerConfig = toml::from_str(
        r#"
        jwks_file = "keys/jwks.json"
        hs256_secret_file = "/etc/jmxgate/secret"
        issuer = "https://idp.example"
        audience = "jmxgate"
        leeway = "1m 30s"
        roles_claim = "realm_access.roles"

        [role_map]
        "jmx-admin" = ["ops", "audit"]
        "#,
    )
    .unwrap();
    assert_eq!(config.role_map["jmx-admin"], ["ops", "audit"]);
    assert_eq!(config.leeway, Duration::from_secs(90));
    assert_eq!(config.principal_claim, "sub");
    assert_eq!(config.roles_claim, "realm_access.roles");

    let defaults: BearerConfig = toml::from_str("jwks_file = \"j\"").unwrap();
    assert_eq!(defaults.leeway, Duration::from_secs(30));
    assert_eq!(defaults.roles_claim, "roles");
    assert!(defaults.role_map.is_empty());
    assert_eq!(
        BearerConfig {
            jwks_file: Some("j".into()),
            ..BearerConfig::default()
        },
        defaults
    );

    let err =
        toml::from_str::<BearerConfig>("jwks_file = \"j\"\nalgorithms = [\"none\"]").unwrap_err();
    assert!(err.to_string().contains("algorithms"), "{err}");

    let mut config = config;
    config.resolve_relative_paths(Path::new("/etc/jmxgate"));
    assert_eq!(
        config.jwks_file.as_deref(),
        Some(Path::new("/etc/jmxgate/keys/jwks.json"))
    );
    assert_eq!(
        config.hs256_secret_file.as_deref(),
        Some(Path::new("/etc/jmxgate/secret"))
    );
    assert_eq!(config.rs256_public_key_file, None);
}

#[test]
fn config_errors_name_the_file_and_cause() {
    let files = Files::new();
    let k = keys();

    let err = Bearer::from_config(&BearerConfig::default()).unwrap_err();
    assert!(err.contains("no key configured"), "{err}");

    let missing = files.dir.path().join("missing.pem");
    let err = Bearer::from_config(&BearerConfig {
        rs256_public_key_file: Some(missing.clone()),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(
        err.contains("rs256_public_key_file") && err.contains(&missing.display().to_string()),
        "{err}"
    );
    assert!(err.contains("cannot read"), "{err}");

    let short = files.write("short", "too-short\n");
    let err = Bearer::from_config(&BearerConfig {
        hs256_secret_file: Some(short),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(
        err.contains("hs256_secret_file") && err.contains("at least 32"),
        "{err}"
    );

    let private = files.write("rsa.pem", &k.rsa.private);
    let err = Bearer::from_config(&BearerConfig {
        rs256_public_key_file: Some(private),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(err.contains("private key"), "{err}");

    // An EC key where an RSA key belongs, and the other way round.
    let ec_pub = files.write("ec.pub.pem", &k.ec.public);
    let rsa_pub = files.write("rsa.pub.pem", &k.rsa.public);
    let err = Bearer::from_config(&BearerConfig {
        rs256_public_key_file: Some(ec_pub),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(err.contains("RSA public key"), "{err}");
    let err = Bearer::from_config(&BearerConfig {
        es256_public_key_file: Some(rsa_pub),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(
        err.contains("es256_public_key_file") && err.contains("EC public key"),
        "{err}"
    );

    // ES256 is P-256 only.
    let p384 = files.write(
        "p384.pub.pem",
        rcgen_ec(&rcgen::PKCS_ECDSA_P384_SHA384).public,
    );
    let err = Bearer::from_config(&BearerConfig {
        es256_public_key_file: Some(p384),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(err.contains("P-256"), "{err}");

    let garbage = files.write("garbage.json", "{not json");
    let err = Bearer::from_config(&BearerConfig {
        jwks_file: Some(garbage.clone()),
        ..BearerConfig::default()
    })
    .unwrap_err();
    assert!(
        err.contains("jwks_file") && err.contains(&garbage.display().to_string()),
        "{err}"
    );

    let err = Bearer::from_config(&BearerConfig {
        leeway: Duration::from_secs(601),
        ..hs256_config(&files)
    })
    .unwrap_err();
    assert!(err.contains("leeway"), "{err}");
    assert!(Bearer::from_config(&BearerConfig {
        leeway: Duration::from_secs(600),
        ..hs256_config(&files)
    })
    .is_ok());
}

#[test]
fn debug_output_has_no_key_material() {
    let files = Files::new();
    let bearer = build(&hs256_config(&files));
    let debug = format!("{bearer:?}");
    assert!(
        !debug.contains(std::str::from_utf8(SECRET).unwrap()),
        "{debug}"
    );
}
