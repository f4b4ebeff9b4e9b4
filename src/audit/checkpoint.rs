//! Signed checkpoints: the anchor the hash chain lacks. Whoever can write
//! the files can edit a record and recompute every hash after it; they
//! cannot sign. A checkpoint at `seq` N signs the replica, N and the hash
//! of record N-1, which commits to every record before it, with an Ed25519
//! key that `jmxgate audit verify --public-key` checks.

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
const DOMAIN: &[u8] = b"jmxgate-audit-checkpoint-v1\n";

/// The bytes a checkpoint at `seq` signs: `prev` is the hash of record
/// `seq - 1`.
pub fn message(replica: &str, seq: u64, prev: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(DOMAIN.len() + replica.len() + prev.len() + 24);
    m.extend_from_slice(DOMAIN);
    m.extend_from_slice(replica.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(seq.to_string().as_bytes());
    m.push(b'\n');
    m.extend_from_slice(prev.as_bytes());
    m
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
    pub fn load(path: &Path) -> Result<Signer, String> {
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

    /// The base64 signature of the checkpoint at `seq`.
    pub fn sign(&self, replica: &str, seq: u64, prev: &str) -> String {
        let sig = self.key.sign(&message(replica, seq, prev));
        base64::engine::general_purpose::STANDARD.encode(sig.to_bytes())
    }
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

    /// Checks the checkpoint at `seq` whose `prev` is the recomputed hash
    /// of record `seq - 1`.
    pub fn verify(
        &self,
        key_id: &str,
        replica: &str,
        seq: u64,
        prev: &str,
        sig: &str,
    ) -> Result<(), Rejected> {
        let key = self
            .keys
            .get(key_id)
            .ok_or_else(|| Rejected::UnknownKey(key_id.to_string()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sig)
            .map_err(|_| Rejected::Mismatch)?;
        let sig = Signature::from_slice(&bytes).map_err(|_| Rejected::Mismatch)?;
        key.verify(&message(replica, seq, prev), &sig)
            .map_err(|_| Rejected::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_for_its_replica_seq_and_prev_only() {
        let signer = Signer::new(generate().unwrap());
        let mut ring = Keyring::default();
        ring.add(signer.key.verifying_key());
        let sig = signer.sign("gw-1", 10, "ab");
        assert_eq!(ring.verify(signer.key_id(), "gw-1", 10, "ab", &sig), Ok(()));
        for (replica, seq, prev) in [("gw-2", 10, "ab"), ("gw-1", 11, "ab"), ("gw-1", 10, "ac")] {
            assert_eq!(
                ring.verify(signer.key_id(), replica, seq, prev, &sig),
                Err(Rejected::Mismatch)
            );
        }
        assert_eq!(
            ring.verify(signer.key_id(), "gw-1", 10, "ab", "not base64!"),
            Err(Rejected::Mismatch)
        );
        let other = Signer::new(generate().unwrap());
        assert_eq!(
            ring.verify(
                other.key_id(),
                "gw-1",
                10,
                "ab",
                &other.sign("gw-1", 10, "ab")
            ),
            Err(Rejected::UnknownKey(other.key_id().to_string()))
        );
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
        let sig = signer.sign("r", 1, "p");
        assert_eq!(ring.verify(&id, "r", 1, "p", &sig), Ok(()));
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

    #[test]
    fn the_key_id_is_the_start_of_the_public_keys_sha256() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let full = hex(&Sha256::digest(key.verifying_key().as_bytes()));
        assert_eq!(key_id(&key.verifying_key()), full[..16]);
    }
}
