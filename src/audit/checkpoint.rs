//! Signed checkpoints: the anchor the hash chain lacks. Whoever can write
//! the files can edit a record and recompute every hash after it; they
//! cannot sign. A checkpoint at `seq` N signs the replica, N, the hash of
//! record N-1 (which commits to every record before it), its own time,
//! the range it proves and its key id, with an Ed25519 key that `jmxgate
//! audit verify --public-key` checks.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use sha2::{Digest, Sha256};

use super::record::hex;

/// Fixed prefix of every signed message, so a checkpoint signature can't
/// be passed off as any other signature made with the same key.
const DOMAIN: &[u8] = b"jmxgate-audit-checkpoint-v2\n";
/// The first form, which signed the replica, `seq` and `prev` only: its
/// checkpoints still verify, their time shown as not signed.
const DOMAIN_V1: &[u8] = b"jmxgate-audit-checkpoint-v1\n";

/// What a checkpoint signs: every field of it a verifier relies on or
/// prints. `prev` is the hash of record `seq - 1`, which commits to every
/// record before it.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    pub replica: &'a str,
    pub seq: u64,
    pub prev: &'a str,
    pub time: &'a str,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub key_id: &'a str,
}

/// The bytes a checkpoint signs: each field on a line of its own (an
/// absent number as an empty line).
pub fn message(c: &Signed<'_>) -> Vec<u8> {
    let number = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    let mut m = DOMAIN.to_vec();
    for field in [
        c.replica,
        &c.seq.to_string(),
        c.prev,
        c.time,
        &number(c.first_seq),
        &number(c.last_seq),
        c.key_id,
    ] {
        m.extend_from_slice(field.as_bytes());
        m.push(b'\n');
    }
    m
}

/// The first form's message: replica, `seq` and `prev`.
fn message_v1(replica: &str, seq: u64, prev: &str) -> Vec<u8> {
    let mut m = DOMAIN_V1.to_vec();
    m.extend_from_slice(replica.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(seq.to_string().as_bytes());
    m.push(b'\n');
    m.extend_from_slice(prev.as_bytes());
    m
}

/// What a signature that holds proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// Every field (the current form).
    Whole,
    /// The chain up to it, not its time or range (the first form).
    ChainOnly,
}

/// First 16 hex digits of the SHA-256 of the raw 32-byte public key.
pub fn key_id(key: &VerifyingKey) -> String {
    let mut id = hex(&Sha256::digest(key.as_bytes()));
    id.truncate(16);
    id
}

/// The writer's signing key. Its `Debug` shows the key id only.
pub struct Signer {
    key: SigningKey,
    key_id: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// Reads a PKCS#8 PEM Ed25519 private key. The error names the file,
    /// never its content.
    ///
    /// A key others may read is refused: whoever reads it can sign
    /// forgeries. One its group may read is taken, with a warning.
    pub fn load(path: &Path) -> Result<Signer, String> {
        check_key_mode(path)?;
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "audit.signing_key_file {}: cannot read it: {e}",
                path.display()
            )
        })?;
        let key = SigningKey::from_pkcs8_pem(&text).map_err(|_| {
            format!(
                "audit.signing_key_file {}: not an Ed25519 private key in PKCS#8 PEM \
                 (make one with `jmxgate audit keygen --out FILE`)",
                path.display()
            )
        })?;
        Ok(Signer::new(key))
    }

    pub fn new(key: SigningKey) -> Signer {
        let key_id = key_id(&key.verifying_key());
        Signer { key, key_id }
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The public half, for `jmxgate audit verify --public-key`.
    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The base64 signature of a checkpoint (its `key_id` is this key's).
    pub fn sign(&self, checkpoint: &Signed<'_>) -> String {
        let sig = self.key.sign(&message(checkpoint));
        base64::engine::general_purpose::STANDARD.encode(sig.to_bytes())
    }
}

/// Refuses a private key file that others can read or write; warns when
/// its group can read it.
fn check_key_mode(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(()); // reading it says why
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o007 != 0 {
            return Err(format!(
                "audit.signing_key_file {}: others may read or write it (mode {mode:03o}); \
                 whoever reads it can sign forged checkpoints: chmod 600 it",
                path.display()
            ));
        }
        if mode & 0o070 != 0 {
            tracing::warn!(
                "audit.signing_key_file {}: its group may use it (mode {mode:03o}); chmod 600 it \
                 unless that group must sign",
                path.display()
            );
        }
    }
    Ok(())
}

/// A new key from the operating system's random source.
pub fn generate() -> Result<SigningKey, String> {
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| format!("no random bytes for a key: {e}"))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// `FILE.pub` next to a private key file.
pub fn public_key_path(private: &Path) -> PathBuf {
    let mut name = private.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Writes a new private key to `out` (mode 0600) and its public key to
/// `out.pub`; refuses to overwrite either. Returns the key id.
pub fn keygen(out: &Path) -> Result<String, String> {
    let public = public_key_path(out);
    for p in [out, public.as_path()] {
        if p.exists() {
            return Err(format!(
                "{} exists; not overwriting a key (choose another --out, or remove it first)",
                p.display()
            ));
        }
    }
    let key = generate()?;
    let private_pem = key
        .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map_err(|e| format!("encoding the private key: {e}"))?;
    let public_pem = key
        .verifying_key()
        .to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map_err(|e| format!("encoding the public key: {e}"))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(out)
        .and_then(|mut f| {
            f.write_all(private_pem.as_bytes())
                .and_then(|()| f.sync_all())
        })
        .map_err(|e| format!("writing {}: {e}", out.display()))?;
    std::fs::write(&public, public_pem)
        .map_err(|e| format!("writing {}: {e}", public.display()))?;
    Ok(key_id(&key.verifying_key()))
}

/// Why a checkpoint's signature is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// No given public key has this id.
    UnknownKey(String),
    /// The signature is not the key's over the recomputed chain.
    Mismatch,
}

/// The public keys `verify` accepts, by key id.
#[derive(Debug, Default)]
pub struct Keyring {
    keys: HashMap<String, VerifyingKey>,
}

impl Keyring {
    /// Reads SPKI PEM public keys (`FILE.pub` from `keygen`).
    pub fn load(paths: &[PathBuf]) -> Result<Keyring, String> {
        let mut ring = Keyring::default();
        for path in paths {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("public key {}: cannot read it: {e}", path.display()))?;
            let key = VerifyingKey::from_public_key_pem(&text).map_err(|_| {
                format!(
                    "public key {}: not an Ed25519 public key in PEM (the FILE.pub that \
                     `jmxgate audit keygen` wrote)",
                    path.display()
                )
            })?;
            ring.add(key);
        }
        Ok(ring)
    }

    pub fn add(&mut self, key: VerifyingKey) {
        self.keys.insert(key_id(&key), key);
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks a checkpoint whose `prev` is the recomputed hash of record
    /// `seq - 1`: in the current form (every field signed), else in the
    /// first form (the chain only).
    pub fn verify(&self, checkpoint: &Signed<'_>, sig: &str) -> Result<Proof, Rejected> {
        let key = self
            .keys
            .get(checkpoint.key_id)
            .ok_or_else(|| Rejected::UnknownKey(checkpoint.key_id.to_string()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sig)
            .map_err(|_| Rejected::Mismatch)?;
        let sig = Signature::from_slice(&bytes).map_err(|_| Rejected::Mismatch)?;
        if key.verify(&message(checkpoint), &sig).is_ok() {
            return Ok(Proof::Whole);
        }
        let v1 = message_v1(checkpoint.replica, checkpoint.seq, checkpoint.prev);
        key.verify(&v1, &sig)
            .map(|()| Proof::ChainOnly)
            .map_err(|_| Rejected::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint<'a>(key_id: &'a str) -> Signed<'a> {
        Signed {
            replica: "gw-1",
            seq: 10,
            prev: "ab",
            time: "2026-11-24T10:00:00.000Z",
            first_seq: Some(3),
            last_seq: Some(9),
            key_id,
        }
    }

    #[test]
    fn a_signature_holds_for_every_field_it_signs_and_no_other_value() {
        let signer = Signer::new(generate().unwrap());
        let mut ring = Keyring::default();
        ring.add(signer.key.verifying_key());
        let signed = checkpoint(signer.key_id());
        let sig = signer.sign(&signed);
        assert_eq!(ring.verify(&signed, &sig), Ok(Proof::Whole));
        let forged = [
            Signed {
                replica: "gw-2",
                ..signed
            },
            Signed { seq: 11, ..signed },
            Signed {
                prev: "ac",
                ..signed
            },
            Signed {
                time: "2020-01-01T00:00:00.000Z",
                ..signed
            },
            Signed {
                first_seq: Some(1),
                ..signed
            },
            Signed {
                first_seq: None,
                ..signed
            },
            Signed {
                last_seq: Some(8),
                ..signed
            },
        ];
        for f in forged {
            assert_eq!(ring.verify(&f, &sig), Err(Rejected::Mismatch), "{f:?}");
        }
        assert_eq!(ring.verify(&signed, "not base64!"), Err(Rejected::Mismatch));
        let other = Signer::new(generate().unwrap());
        let theirs = checkpoint(other.key_id());
        assert_eq!(
            ring.verify(&theirs, &other.sign(&theirs)),
            Err(Rejected::UnknownKey(other.key_id().to_string()))
        );
    }

    /// Checkpoints written before the time and range were signed still
    /// prove their chain, and say that is all they prove.
    #[test]
    fn a_first_form_signature_proves_the_chain_only() {
        let signer = Signer::new(generate().unwrap());
        let mut ring = Keyring::default();
        ring.add(signer.key.verifying_key());
        let signed = checkpoint(signer.key_id());
        let old = signer.key.sign(&message_v1("gw-1", 10, "ab"));
        let old = base64::engine::general_purpose::STANDARD.encode(old.to_bytes());
        assert_eq!(ring.verify(&signed, &old), Ok(Proof::ChainOnly));
        let moved = Signed { seq: 11, ..signed };
        assert_eq!(ring.verify(&moved, &old), Err(Rejected::Mismatch));
    }

    #[test]
    fn keygen_writes_a_private_and_a_public_key_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("audit.key");
        let id = keygen(&out).unwrap();
        assert_eq!(id.len(), 16);
        let signer = Signer::load(&out).unwrap();
        assert_eq!(signer.key_id(), id);
        let ring = Keyring::load(&[public_key_path(&out)]).unwrap();
        let signed = checkpoint(&id);
        let sig = signer.sign(&signed);
        assert_eq!(ring.verify(&signed, &sig), Ok(Proof::Whole));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&out).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let before = std::fs::read(&out).unwrap();
        let e = keygen(&out).unwrap_err();
        assert!(e.contains("exists"), "{e}");
        assert_eq!(std::fs::read(&out).unwrap(), before);
        // The public key alone is there: still refused.
        std::fs::remove_file(&out).unwrap();
        assert!(keygen(&out).unwrap_err().contains(".pub exists"));
    }

    #[cfg(unix)]
    #[test]
    fn a_key_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("audit.key");
        keygen(&out).unwrap();
        assert!(Signer::load(&out).is_ok());
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Signer::load(&out).unwrap_err();
        assert!(
            e.contains("others may read") && e.contains("chmod 600"),
            "{e}"
        );
        // Group-readable: taken (with a warning in the log).
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(Signer::load(&out).is_ok());
    }

    #[test]
    fn unreadable_keys_are_errors_naming_the_file_not_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = Signer::load(&bad).unwrap_err();
        assert!(e.contains("bad.pem") && !e.contains("c2VjcmV0"), "{e}");
        let e = Signer::load(&dir.path().join("missing")).unwrap_err();
        assert!(e.contains("missing") && e.contains("cannot read"), "{e}");
        assert!(Keyring::load(&[bad]).unwrap_err().contains("bad.pem"));
    }

    use super::super::chain::{self, seal_in_place, Problem, Report};
    use super::super::record::{Encoded, Entry};
    use super::super::writer;
    use serde_json::Value;
    use std::sync::Arc;
    use std::time::Duration;

    fn sink(dir: &Path, signer: &Arc<Signer>) -> writer::FileSink {
        writer::FileSink {
            dir: dir.to_path_buf(),
            rotate_bytes: 1 << 30,
            rotate_after: Duration::from_secs(3600),
            durable_all: false,
            stdout: false,
            replica: "gw-1".into(),
            signer: Some(signer.clone()),
            checkpoint_records: 5,
            checkpoint_interval: Duration::from_secs(3600),
        }
    }

    fn item(n: usize) -> Encoded {
        Encoded::new(vec![Entry {
            time: "2026-11-24T10:00:00.000Z".into(),
            event: "item".into(),
            index: Some(n),
            status: Some(200),
            ..Entry::default()
        }])
    }

    /// Writes `n` items with the real writer (a checkpoint every 5
    /// records), then `records_after` more without a checkpoint after them
    /// unless `stop` (a clean stop ends with one).
    fn write_log(dir: &Path, signer: &Arc<Signer>, n: usize, stop: bool) {
        let (w, _) = writer::start(sink(dir, signer), writer::WriterMetrics::default()).unwrap();
        for i in 0..n {
            w.append(&item(i), false).unwrap();
        }
        if stop {
            w.append_last(&item(n)).unwrap();
        }
    }

    fn ring(signers: &[&Arc<Signer>]) -> Keyring {
        let mut ring = Keyring::default();
        for s in signers {
            ring.add(s.verifying_key());
        }
        ring
    }

    fn verify_lines(lines: &[String], keys: &Keyring) -> Report {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-000000000000-x.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        chain::verify_with(&[path], Some(keys)).unwrap()
    }

    fn seq_of(line: &str) -> u64 {
        serde_json::from_str::<Value>(line).unwrap()["seq"]
            .as_u64()
            .unwrap()
    }

    fn is_checkpoint(line: &str) -> bool {
        line.contains("\"event\":\"checkpoint\"")
    }

    /// What a forger with write access does after changing `lines[from]`:
    /// renumbers every record from there on to follow its predecessor and
    /// re-seals the rest of the chain with the crate's own sealing code.
    fn reseal_from(lines: &mut [String], from: usize) {
        for i in from..lines.len() {
            let (prev_seq, prev_hash) = if i == 0 {
                (None, chain::GENESIS.to_string())
            } else {
                let v: Value = serde_json::from_str(&lines[i - 1]).unwrap();
                (v["seq"].as_u64(), v["hash"].as_str().unwrap().to_string())
            };
            let mut v: Value = serde_json::from_str(&lines[i]).unwrap();
            let obj = v.as_object_mut().unwrap();
            obj.remove("hash");
            obj.insert("seq".into(), prev_seq.map_or(0, |s| s + 1).into());
            obj.insert("prev".into(), prev_hash.into());
            let mut text = serde_json::to_vec(&v).unwrap();
            seal_in_place(&mut text, 0);
            lines[i] = String::from_utf8(text).unwrap();
        }
    }

    fn signed_log(n: usize, stop: bool) -> (Arc<Signer>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let signer = Arc::new(Signer::new(generate().unwrap()));
        write_log(dir.path(), &signer, n, stop);
        (signer, chain::lines_in(dir.path()).unwrap())
    }

    fn first_checkpoint_after(lines: &[String], index: usize) -> u64 {
        seq_of(lines[index..].iter().find(|l| is_checkpoint(l)).unwrap())
    }

    #[test]
    fn an_intact_signed_log_is_proven_to_its_end() {
        let (signer, lines) = signed_log(12, true);
        let r = verify_lines(&lines, &ring(&[&signer]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.replica.as_deref(), Some("gw-1"));
        // log_opened + 12 items + the last item: a checkpoint after every
        // 5, and one at the stop.
        assert_eq!(r.checkpoints, 3, "{lines:#?}");
        let proof = r.proven.clone().unwrap();
        assert_eq!(
            Some(proof.seq),
            r.last_seq,
            "the stop ends with a checkpoint"
        );
        assert_eq!(proof.key_id, signer.key_id());
        assert_eq!(r.unproven(), 0);
        // Each checkpoint says which records it is the first to prove.
        let cps: Vec<Value> = lines
            .iter()
            .filter(|l| is_checkpoint(l))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(cps[0]["first_seq"], 0);
        assert_eq!(cps[0]["last_seq"], 4);
        assert_eq!(cps[1]["first_seq"], 6);
        assert_eq!(cps[0]["replica"], "gw-1");
    }

    #[test]
    fn records_after_the_last_checkpoint_are_unproven_not_tampered() {
        let (signer, mut lines) = signed_log(13, false);
        let r = verify_lines(&lines, &ring(&[&signer]));
        assert!(!r.tampered(), "{:?}", r.findings);
        // log_opened, 4 items, checkpoint 5, 5 items, checkpoint 11, 4 items.
        assert_eq!(r.proven.as_ref().unwrap().seq, 11);
        assert_eq!(r.unproven(), 4);
        // Cutting records off the end is not detectable, but what is cut
        // was never reported as proven.
        lines.truncate(lines.len() - 2);
        let r = verify_lines(&lines, &ring(&[&signer]));
        assert!(!r.tampered());
        assert_eq!(r.unproven(), 2);
    }

    #[test]
    fn an_edited_record_is_found_by_its_hash_or_by_the_next_checkpoint() {
        let (signer, lines) = signed_log(20, true);
        let keys = ring(&[&signer]);
        let target = 7;
        assert!(!is_checkpoint(&lines[target]));
        let mut edited = lines.clone();
        edited[target] = edited[target].replace("\"status\":200", "\"status\":403");
        assert_ne!(edited, lines);
        let r = verify_lines(&edited, &keys);
        assert_eq!(r.findings[0].problem, Problem::Edited);
        assert_eq!(r.findings[0].line, target + 1);

        // The forger recomputes the chain: the chain alone says intact…
        reseal_from(&mut edited, target);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-1.jsonl");
        std::fs::write(&path, edited.join("\n") + "\n").unwrap();
        assert!(chain::verify(&[path]).unwrap().findings.is_empty());
        // …the first checkpoint after the edit does not.
        let r = verify_lines(&edited, &keys);
        assert!(r.tampered());
        assert_eq!(r.findings[0].problem, Problem::BadSignature);
        assert_eq!(
            r.findings[0].seq,
            Some(first_checkpoint_after(&edited, target))
        );
        let shown = r.findings[0].to_string();
        assert!(
            shown.contains("signature does not match")
                && shown.contains("it, or records before it, were changed"),
            "{shown}"
        );
        // What came before the edit is still proven.
        assert!(r.proven.unwrap().seq < target as u64);
    }

    #[test]
    fn a_checkpoints_forged_time_or_range_fails_even_with_the_chain_recomputed() {
        let (signer, lines) = signed_log(20, true);
        let keys = ring(&[&signer]);
        let at = lines.iter().position(|l| is_checkpoint(l)).unwrap();
        let forgeries: [&dyn Fn(&str) -> String; 3] = [
            &|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let time = v["time"].as_str().unwrap().to_string();
                l.replace(&time, "2020-01-01T00:00:00.000Z")
            },
            &|l| l.replace("\"first_seq\":", "\"first_seq\":1"),
            &|l| l.replace("\"last_seq\":", "\"last_seq\":9"),
        ];
        for forge in forgeries {
            let mut forged = lines.clone();
            forged[at] = forge(&forged[at]);
            assert_ne!(forged[at], lines[at]);
            reseal_from(&mut forged, at);
            let r = verify_lines(&forged, &keys);
            assert!(r.tampered(), "{}", forged[at]);
            assert_eq!(r.findings[0].problem, Problem::BadSignature);
            assert_eq!(r.findings[0].seq, Some(seq_of(&lines[at])));
        }
        // Untouched, the same checkpoint proves its time.
        let r = verify_lines(&lines, &keys);
        assert!(r.proven.unwrap().time_signed);
    }

    #[test]
    fn removed_inserted_and_reordered_records_fail_the_next_checkpoint() {
        let (signer, lines) = signed_log(20, true);
        let keys = ring(&[&signer]);
        let at = 8;
        let removed = {
            let mut l = lines.clone();
            l.remove(at);
            l
        };
        assert!(matches!(
            verify_lines(&removed, &keys).findings[0].problem,
            Problem::Removed { .. }
        ));
        let inserted = {
            let mut l = lines.clone();
            l.insert(
                at,
                l[at].replace("\"index\":", "\"principal\":\"mallory\",\"index\":"),
            );
            l
        };
        assert!(verify_lines(&inserted, &keys).tampered());
        let reordered = {
            let mut l = lines.clone();
            l.swap(at, at + 1);
            l
        };
        assert!(verify_lines(&reordered, &keys).tampered());
        // The same, with the chain renumbered and recomputed afterwards.
        for (what, mut forged) in [
            ("removed", removed),
            ("inserted", inserted),
            ("reordered", reordered),
        ] {
            reseal_from(&mut forged, at);
            let r = verify_lines(&forged, &keys);
            assert_eq!(
                r.findings.len(),
                r.findings
                    .iter()
                    .filter(|f| f.problem == Problem::BadSignature)
                    .count(),
                "{what}: {:?}",
                r.findings
            );
            assert_eq!(
                r.findings.first().map(|f| f.seq),
                Some(Some(first_checkpoint_after(&forged, at))),
                "{what}"
            );
        }
    }

    #[test]
    fn a_checkpoint_by_an_unknown_key_is_named_by_its_key_id() {
        let (signer, lines) = signed_log(6, true);
        let other = Arc::new(Signer::new(generate().unwrap()));
        let r = verify_lines(&lines, &ring(&[&other]));
        assert!(r.tampered());
        assert_eq!(
            r.findings[0].problem,
            Problem::UnknownKey(signer.key_id().into())
        );
        assert!(r.findings[0].to_string().contains(signer.key_id()));
        assert_eq!(r.proven, None);
    }

    #[test]
    fn old_keys_stay_valid_for_old_checkpoints_after_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let a = Arc::new(Signer::new(generate().unwrap()));
        let b = Arc::new(Signer::new(generate().unwrap()));
        write_log(dir.path(), &a, 7, true);
        // A restart with the new key continues the chain in a new file.
        write_log(dir.path(), &b, 7, true);
        let files = chain::files_in(dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        let both = chain::verify_with(&files, Some(&ring(&[&a, &b]))).unwrap();
        assert!(both.findings.is_empty(), "{:?}", both.findings);
        assert_eq!(both.proven.unwrap().key_id, b.key_id());
        let only_b = chain::verify_with(&files, Some(&ring(&[&b]))).unwrap();
        assert!(only_b.tampered());
        assert!(only_b
            .findings
            .iter()
            .all(|f| f.problem == Problem::UnknownKey(a.key_id().into())));
        assert_eq!(only_b.findings.len(), 2, "both of A's checkpoints");
        // B's first checkpoint proves from where A's last one stopped.
        let lines = chain::lines_in(dir.path()).unwrap();
        let b_first: Value = lines
            .iter()
            .filter(|l| l.contains(b.key_id()))
            .map(|l| serde_json::from_str(l).unwrap())
            .next()
            .unwrap();
        let a_last = lines
            .iter()
            .filter(|l| l.contains(a.key_id()))
            .map(|l| seq_of(l))
            .max()
            .unwrap();
        assert_eq!(b_first["first_seq"].as_u64(), Some(a_last + 1));
    }

    #[test]
    fn the_key_id_is_the_start_of_the_public_keys_sha256() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let full = hex(&Sha256::digest(key.verifying_key().as_bytes()));
        assert_eq!(key_id(&key.verifying_key()), full[..16]);
    }
}
