//! The tamper-evident format: one JSON object per line, each sealed with a
//! SHA-256 over its own bytes, which include the previous record's hash.
//! Editing, removing or reordering a record breaks the chain at that
//! record; `seq` numbers (global across files) tell which it was.
//!
//! A line is `{…,"seq":N,…,"prev":"<hex>","hash":"<hex>"}`; `hash` is the
//! SHA-256 of the line with `,"hash":"<hex>"` removed, exactly as written.
//!
//! The chain alone can be recomputed by whoever edits the files; signed
//! `checkpoint` records (see `checkpoint`) anchor it, and [`verify_with`]
//! checks them against the chain as it is now.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::checkpoint::{Keyring, Rejected};
use super::record::hex;

/// `prev` of the very first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Seals the unsealed line that `buf` holds from `start` on, in place (the
/// writer builds a batch in one buffer); returns its hash.
pub fn seal_in_place(buf: &mut Vec<u8>, start: usize) -> String {
    let hash = hex(&Sha256::digest(&buf[start..]));
    assert_eq!(buf.pop(), Some(b'}'), "a JSON object");
    buf.extend_from_slice(b",\"hash\":\"");
    buf.extend_from_slice(hash.as_bytes());
    buf.extend_from_slice(b"\"}");
    hash
}

/// Writes `records` as sealed lines into `buf`, numbered from `seq`,
/// chained from `prev` and marked as written by `replica`; returns the
/// next `seq` and the last hash. The lines are exactly what serialising
/// each [`super::Entry`] with its `seq`, `replica` and `prev` set would
/// give, then sealed.
pub fn seal_records<'a>(
    bodies: impl IntoIterator<Item = &'a [u8]>,
    mut seq: u64,
    prev: &str,
    replica: &str,
    buf: &mut Vec<u8>,
) -> (u64, String) {
    let mut prev = prev.to_string();
    let replica = serde_json::to_string(replica).expect("a string serialises");
    for body in bodies {
        buf.reserve(body.len() + 200 + replica.len());
        let start = buf.len();
        buf.extend_from_slice(b"{\"seq\":");
        buf.extend_from_slice(seq.to_string().as_bytes());
        buf.extend_from_slice(b",\"replica\":");
        buf.extend_from_slice(replica.as_bytes());
        buf.push(b',');
        buf.extend_from_slice(body);
        buf.extend_from_slice(b",\"prev\":\"");
        buf.extend_from_slice(prev.as_bytes());
        buf.extend_from_slice(b"\"}");
        prev = seal_in_place(buf, start);
        buf.push(b'\n');
        seq += 1;
    }
    (seq, prev)
}

/// Splits a sealed line into the unsealed text and the stated hash.
fn unseal(line: &str) -> Option<(String, &str)> {
    let body = line.strip_suffix("\"}")?;
    let (head, hash) = body.rsplit_once(",\"hash\":\"")?;
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (format!("{head}}}"), hash))
}

/// What is wrong at one place of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The line is not a sealed record, or its hash does not match.
    Edited,
    /// `seq` jumps forward: records before this one are missing.
    Removed { missing_from: u64, missing_to: u64 },
    /// `seq` goes backwards or repeats.
    Reordered,
    /// `prev` is not the previous record's hash although `seq` follows.
    ChainBroken,
    /// The last line of the last file ends without a newline: a write cut
    /// short (a crash mid-write), or a truncated file.
    TornTail,
    /// A checkpoint's signature does not hold for the chain as it is now:
    /// a record before it was changed and the chain recomputed.
    BadSignature,
    /// A checkpoint signed with a key none of the given public keys is.
    UnknownKey(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
    pub seq: Option<u64>,
    pub problem: Problem,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)?;
        let at = self.seq.unwrap_or_default();
        match &self.problem {
            Problem::BadSignature => {
                return write!(
                    f,
                    ": checkpoint at seq {at}: signature does not match \u{2014} it, or records before it, were changed"
                )
            }
            Problem::UnknownKey(id) => {
                return write!(
                    f,
                    ": checkpoint at seq {at}: signed by key {id}, which no --public-key file holds; \
                     give that key's .pub file too (after a key rotation, the old key's)"
                )
            }
            _ => {}
        }
        if let Some(s) = self.seq {
            write!(f, " (seq {s})")?;
        }
        match &self.problem {
            Problem::Edited => write!(f, ": record edited (its hash does not match its content)"),
            Problem::Removed {
                missing_from,
                missing_to,
            } => write!(f, ": records {missing_from}..={missing_to} were removed before this one"),
            Problem::Reordered => write!(f, ": record out of order (reordered or duplicated)"),
            Problem::ChainBroken => write!(
                f,
                ": record does not follow the previous one (a record before it was replaced or reordered)"
            ),
            Problem::TornTail => write!(f, ": truncated tail (last line incomplete: a write cut short)"),
            Problem::BadSignature | Problem::UnknownKey(_) => Ok(()),
        }
    }
}

/// A checkpoint whose signature holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    pub seq: u64,
    pub time: String,
    /// Whether the signature covers `time` (checkpoints written before it
    /// did prove their chain only).
    pub time_signed: bool,
    pub key_id: String,
}

/// The result of checking a set of files.
#[derive(Debug, Default)]
pub struct Report {
    /// Who wrote the records (`None`: files from before replica ids).
    pub replica: Option<String>,
    pub files: usize,
    pub records: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// The chain was not checked before this record (the files given
    /// don't start at the beginning of the log).
    pub anchored_at: Option<u64>,
    pub findings: Vec<Finding>,
    /// `checkpoint` records seen (signatures checked or not).
    pub checkpoints: u64,
    /// The last checkpoint whose signature holds (only when keys were
    /// given).
    pub proven: Option<Proof>,
}

impl Report {
    /// Tampering found (a torn tail alone is a crash's mark, not tampering).
    pub fn tampered(&self) -> bool {
        self.findings.iter().any(|f| f.problem != Problem::TornTail)
    }

    /// Records after the last proven checkpoint (all of them without one).
    pub fn unproven(&self) -> u64 {
        match (&self.proven, self.last_seq) {
            (Some(p), Some(last)) => last.saturating_sub(p.seq),
            _ => self.records,
        }
    }
}

/// What [`chains`] needs of a file: its first readable record's `seq`,
/// `replica` and `prev`, and its last intact record's hash.
#[derive(Debug, Default)]
struct Ends {
    first_seq: Option<u64>,
    replica: Option<String>,
    first_prev: Option<String>,
    /// The name of the file a `log_opened` first record says it continues.
    continues: Option<String>,
    last_hash: Option<String>,
}

/// The file a `log_opened` note names as the one before it: the writer
/// writes `continues <path>` when a gateway starts and `<why>; follows
/// <path>` when it rotates (`writer.rs`). Its name only: copies of a log
/// live elsewhere.
fn continued_file(note: &str) -> Option<String> {
    let path = note
        .strip_prefix("continues ")
        .or_else(|| note.rsplit_once("; follows ").map(|(_, p)| p))?;
    Some(Path::new(path).file_name()?.to_string_lossy().into_owned())
}

fn ends(file: &Path) -> std::io::Result<Ends> {
    let text = std::fs::read_to_string(file)?;
    let mut ends = Ends::default();
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            if let Some(seq) = v.get("seq").and_then(Value::as_u64) {
                let field = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
                ends.first_seq = Some(seq);
                ends.replica = field("replica");
                ends.first_prev = field("prev");
                if field("event").as_deref() == Some("log_opened") {
                    ends.continues = field("note").as_deref().and_then(continued_file);
                }
                break;
            }
        }
    }
    ends.last_hash = last_sealed(&text).map(|(_, hash)| hash);
    Ok(ends)
}

/// One chain of records, as [`chains`] finds it.
#[derive(Debug, PartialEq)]
pub struct Chain {
    /// Who wrote it, in order (`None`: files from before replica ids);
    /// more than one where a gateway continued the log under a new id.
    pub replicas: Vec<Option<String>>,
    /// Its files in chain order.
    pub files: Vec<PathBuf>,
}

/// The chains the files hold. A file follows the file whose last record
/// its first record names as `prev`: a gateway continues the newest file
/// of its directory even when its replica id changed between restarts (a
/// new pod name, a renamed host), so such a chain crosses replicas and
/// the link between them is checked too. A file that follows none by
/// hash follows the file its first record says it continues, else the
/// one before it of the same replica, so a cut link shows as one when
/// the chain is verified. Replicas that never continued each other
/// (several gateways' logs side by side) are separate chains, by replica
/// name.
pub fn chains(files: &[PathBuf]) -> std::io::Result<Vec<Chain>> {
    let mut all = Vec::with_capacity(files.len());
    for f in files {
        all.push((ends(f)?, f.clone()));
    }
    // Each replica's files in seq order, replicas by name: the order
    // chains are reported in, and the fallback predecessor of a file.
    all.sort_by(|(a, fa), (b, fb)| {
        (&a.replica, a.first_seq.unwrap_or(u64::MAX), fa).cmp(&(
            &b.replica,
            b.first_seq.unwrap_or(u64::MAX),
            fb,
        ))
    });
    let by_last_hash: std::collections::HashMap<&str, usize> = all
        .iter()
        .enumerate()
        .filter_map(|(i, (e, _))| Some((e.last_hash.as_deref()?, i)))
        .collect();
    let mut next: Vec<Option<usize>> = vec![None; all.len()];
    let mut has_previous = vec![false; all.len()];
    // Links by hash first, then the same replica's previous file for the
    // files left without one.
    for (i, (e, _)) in all.iter().enumerate() {
        let linked = e
            .first_prev
            .as_deref()
            .filter(|prev| *prev != GENESIS)
            .and_then(|prev| by_last_hash.get(prev).copied())
            .filter(|&p| p != i && next[p].is_none());
        if let Some(p) = linked {
            next[p] = Some(i);
            has_previous[i] = true;
        }
    }
    let by_name: std::collections::HashMap<String, usize> = all
        .iter()
        .enumerate()
        .filter_map(|(i, (_, f))| Some((f.file_name()?.to_string_lossy().into_owned(), i)))
        .collect();
    for i in 0..all.len() {
        let named = all[i]
            .0
            .continues
            .as_ref()
            .and_then(|n| by_name.get(n).copied());
        let same_replica = i
            .checked_sub(1)
            .filter(|&p| all[p].0.replica == all[i].0.replica);
        if has_previous[i] {
            continue;
        }
        if let Some(p) = named
            .or(same_replica)
            .filter(|&p| p != i && next[p].is_none())
        {
            next[p] = Some(i);
            has_previous[i] = true;
        }
    }
    let mut chains = Vec::new();
    let mut placed = vec![false; all.len()];
    let starts: Vec<usize> = (0..all.len()).filter(|&i| !has_previous[i]).collect();
    for start in starts {
        let mut chain = Chain {
            replicas: Vec::new(),
            files: Vec::new(),
        };
        let mut at = Some(start);
        while let Some(i) = at.filter(|&i| !placed[i]) {
            placed[i] = true;
            let replica = &all[i].0.replica;
            if chain.replicas.last() != Some(replica) {
                chain.replicas.push(replica.clone());
            }
            chain.files.push(all[i].1.clone());
            at = next[i];
        }
        chains.push(chain);
    }
    // Links that close a loop (only a doctored set of files has one):
    // what is left is checked from where the sort puts it.
    for (i, (e, f)) in all.iter().enumerate() {
        if !placed[i] {
            chains.push(Chain {
                replicas: vec![e.replica.clone()],
                files: vec![f.clone()],
            });
        }
    }
    Ok(chains)
}

/// Orders files by the `seq` of their first record (file names sort the
/// same way when written by jmxgate, but renamed copies need not).
pub fn order_files(files: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut keyed = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f)?;
        let first = text
            .lines()
            .next()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v.get("seq").and_then(Value::as_u64));
        keyed.push((first.unwrap_or(u64::MAX), f.clone()));
    }
    keyed.sort();
    Ok(keyed.into_iter().map(|(_, f)| f).collect())
}

/// Every line of the audit files in `dir`, oldest first.
pub fn lines_in(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut lines = Vec::new();
    for f in files_in(dir)? {
        lines.extend(std::fs::read_to_string(f)?.lines().map(String::from));
    }
    Ok(lines)
}

/// The audit files in a directory, oldest first.
pub fn files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("audit-") && n.ends_with(".jsonl"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The first seq of an audit file from its name, `audit-<first seq>-<time>.jsonl`
/// (as the writer names them): no need to read it.
pub fn first_seq_in_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("audit-")?.split('-').next()?.parse().ok()
}

/// Verifies files in the given order as one chain, without checking
/// checkpoint signatures.
pub fn verify(files: &[PathBuf]) -> std::io::Result<Report> {
    verify_with(files, None)
}

/// Verifies files in the given order as one chain (one replica's); with
/// `keys`, also every checkpoint's signature against the chain as it is.
pub fn verify_with(files: &[PathBuf], keys: Option<&Keyring>) -> std::io::Result<Report> {
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    let mut last: Option<(u64, String)> = None;
    for (fi, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(file)?;
        let last_file = fi + 1 == files.len();
        let lines: Vec<&str> = text.split('\n').collect();
        for (li, line) in lines.iter().enumerate() {
            let is_final_fragment = li + 1 == lines.len();
            if is_final_fragment {
                if !line.is_empty() {
                    // No newline after it: an interrupted write.
                    report.findings.push(Finding {
                        file: file.clone(),
                        line: li + 1,
                        seq: None,
                        problem: if last_file {
                            Problem::TornTail
                        } else {
                            Problem::Edited
                        },
                    });
                }
                break;
            }
            let at = |seq, problem| Finding {
                file: file.clone(),
                line: li + 1,
                seq,
                problem,
            };
            let Some((unsealed, stated)) = unseal(line) else {
                report.findings.push(at(None, Problem::Edited));
                continue;
            };
            let value: Option<Value> = serde_json::from_str(line).ok();
            let seq = value
                .as_ref()
                .and_then(|v| v.get("seq"))
                .and_then(Value::as_u64);
            let prev = value
                .as_ref()
                .and_then(|v| v.get("prev"))
                .and_then(Value::as_str)
                .map(str::to_string);
            let actual = hex(&Sha256::digest(unsealed.as_bytes()));
            let (Some(seq), Some(prev), true) = (seq, prev, actual == stated) else {
                report.findings.push(at(seq, Problem::Edited));
                continue;
            };
            report.records += 1;
            report.first_seq.get_or_insert(seq);
            report.last_seq = Some(seq);
            let field = |name: &str| {
                value
                    .as_ref()
                    .and_then(|v| v.get(name))
                    .and_then(Value::as_str)
            };
            if report.replica.is_none() {
                report.replica = field("replica").map(str::to_string);
            }
            match &last {
                None => {
                    if seq != 0 || prev != GENESIS {
                        report.anchored_at = Some(seq);
                    }
                }
                Some((last_seq, last_hash)) => {
                    let problem = if seq <= *last_seq {
                        Some(Problem::Reordered)
                    } else if seq > last_seq + 1 {
                        Some(Problem::Removed {
                            missing_from: last_seq + 1,
                            missing_to: seq - 1,
                        })
                    } else if prev != *last_hash {
                        Some(Problem::ChainBroken)
                    } else {
                        None
                    };
                    if let Some(p) = problem {
                        report.findings.push(at(Some(seq), p));
                    }
                }
            }
            if field("event") == Some("checkpoint") {
                report.checkpoints += 1;
                if let Some(keys) = keys {
                    let number = |name: &str| {
                        value
                            .as_ref()
                            .and_then(|v| v.get(name))
                            .and_then(Value::as_u64)
                    };
                    let signed = super::checkpoint::Signed {
                        replica: field("replica").unwrap_or_default(),
                        seq,
                        prev: &prev,
                        time: field("time").unwrap_or_default(),
                        first_seq: number("first_seq"),
                        last_seq: number("last_seq"),
                        key_id: field("key_id").unwrap_or_default(),
                    };
                    match keys.verify(&signed, field("sig").unwrap_or_default()) {
                        Ok(proof) => {
                            report.proven = Some(Proof {
                                seq,
                                time: signed.time.to_string(),
                                time_signed: proof == super::checkpoint::Proof::Whole,
                                key_id: signed.key_id.to_string(),
                            })
                        }
                        Err(Rejected::Mismatch) => {
                            report.findings.push(at(Some(seq), Problem::BadSignature))
                        }
                        Err(Rejected::UnknownKey(id)) => {
                            report.findings.push(at(Some(seq), Problem::UnknownKey(id)))
                        }
                    }
                }
            }
            last = Some((seq, stated.to_string()));
        }
    }
    Ok(report)
}

/// The `seq` and hash of the last complete record of a file, to continue
/// the chain after a restart.
pub fn last_record(file: &Path) -> std::io::Result<Option<(u64, String)>> {
    Ok(last_sealed(&std::fs::read_to_string(file)?))
}

/// The `seq` and hash of the last complete, sealed line of a file's text
/// (a torn tail is neither).
fn last_sealed(text: &str) -> Option<(u64, String)> {
    let complete = &text[..text.rfind('\n')?];
    complete.rsplit('\n').find_map(|line| {
        let (_, hash) = unseal(line)?;
        let seq = serde_json::from_str::<Value>(line)
            .ok()?
            .get("seq")?
            .as_u64()?;
        Some((seq, hash.to_string()))
    })
}

/// The `seq` of the last intact checkpoint in a file.
pub fn last_checkpoint(file: &Path) -> std::io::Result<Option<u64>> {
    let text = std::fs::read_to_string(file)?;
    Ok(text
        .lines()
        .rev()
        .filter(|l| l.contains("\"event\":\"checkpoint\"") && unseal(l).is_some())
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get("event").and_then(Value::as_str) == Some("checkpoint"))
                .and_then(|v| v.get("seq").and_then(Value::as_u64))
        }))
}

/// The `seq` of a file's first readable record.
pub fn first_seq(file: &Path) -> std::io::Result<Option<u64>> {
    ends(file).map(|e| e.first_seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seals one unsealed line (`{…,"prev":"…"}`) the way the writer does;
    /// returns the sealed line (without newline) and its hash.
    fn seal(unsealed: &str) -> (String, String) {
        let mut line = unsealed.as_bytes().to_vec();
        let hash = seal_in_place(&mut line, 0);
        (String::from_utf8(line).expect("JSON is UTF-8"), hash)
    }

    #[test]
    fn sealed_records_are_the_entries_serialised_with_seq_and_prev() {
        let entries = vec![
            super::super::Entry {
                time: "2026-11-22T00:00:00.000Z".into(),
                event: "item".into(),
                principal: Some("a \"quoted\" name".into()),
                roles: vec!["ops".into()],
                attribute: Some(serde_json::json!(["A", "B"])),
                status: Some(200),
                ..Default::default()
            },
            super::super::Entry {
                time: "2026-11-22T00:00:01.000Z".into(),
                event: "log_closed".into(),
                ..Default::default()
            },
        ];
        let mut buf = b"earlier\n".to_vec();
        let (next, last) = seal_records(
            super::super::Encoded::new(entries.clone()).bodies(),
            41,
            GENESIS,
            "gw-1",
            &mut buf,
        );
        assert_eq!(next, 43);
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().skip(1).collect();
        let mut prev = GENESIS.to_string();
        for (i, (line, mut e)) in lines.iter().zip(entries).enumerate() {
            e.seq = 41 + i as u64;
            e.replica = Some("gw-1".into());
            e.prev = prev.clone();
            let (expected, hash) = seal(&serde_json::to_string(&e).unwrap());
            assert_eq!(*line, expected);
            prev = hash;
        }
        assert_eq!(last, prev);
    }

    fn chain(n: u64) -> Vec<String> {
        let mut prev = GENESIS.to_string();
        (0..n)
            .map(|seq| {
                let (line, hash) = seal(&format!(
                    "{{\"seq\":{seq},\"event\":\"item\",\"prev\":\"{prev}\"}}"
                ));
                prev = hash;
                line
            })
            .collect()
    }

    /// Sealed records `seqs` of `replica`, chained from `prev`; the lines
    /// and the last hash.
    fn records(replica: &str, seqs: std::ops::Range<u64>, prev: &str) -> (String, String) {
        let mut prev = prev.to_string();
        let mut text = String::new();
        for seq in seqs {
            let (line, hash) = seal(&format!(
                "{{\"seq\":{seq},\"replica\":\"{replica}\",\"event\":\"item\",\"prev\":\"{prev}\"}}"
            ));
            text.push_str(&line);
            text.push('\n');
            prev = hash;
        }
        (text, prev)
    }

    /// Writes the files (name, text) into a fresh directory; returns it
    /// (kept alive) and their paths.
    fn files(texts: &[(&str, &str)]) -> (tempfile::TempDir, Vec<PathBuf>) {
        let dir = tempfile::tempdir().unwrap();
        let paths = texts
            .iter()
            .map(|(name, text)| {
                let path = dir.path().join(name);
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        (dir, paths)
    }

    fn names(chain: &Chain) -> Vec<&str> {
        chain
            .replicas
            .iter()
            .flatten()
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn the_file_a_log_continues_is_read_from_the_writers_notes() {
        assert_eq!(
            continued_file("continues /var/log/jmxgate/audit-000000000007-20261124T010203Z.jsonl")
                .as_deref(),
            Some("audit-000000000007-20261124T010203Z.jsonl")
        );
        assert_eq!(
            continued_file("rotated; follows /a/audit-1.jsonl").as_deref(),
            Some("audit-1.jsonl")
        );
        assert_eq!(continued_file("new log"), None);
        assert_eq!(continued_file("recovered after: disk full"), None);
    }

    #[test]
    fn a_log_continued_under_a_new_replica_id_is_one_chain() {
        // a, then b (a new pod name), then a again: each file continues
        // the one before it.
        let (a1, h) = records("a", 0..3, GENESIS);
        let (b1, h) = records("b", 3..5, &h);
        let (a2, _) = records("a", 5..7, &h);
        let (_dir, paths) = files(&[("1.jsonl", &a1), ("2.jsonl", &b1), ("3.jsonl", &a2)]);
        let found = chains(&paths).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(names(&found[0]), ["a", "b", "a"]);
        assert_eq!(found[0].files, paths);
        let report = verify(&found[0].files).unwrap();
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        assert_eq!((report.records, report.anchored_at), (7, None));
    }

    #[test]
    fn logs_side_by_side_are_separate_chains_and_a_gap_stays_a_gap() {
        let (a1, _) = records("a", 0..3, GENESIS);
        let (b1, _) = records("b", 0..2, GENESIS);
        // a's second file doesn't continue its first: records 3 and 4
        // were removed.
        let (a2, _) = records("a", 5..7, &"f".repeat(64));
        let (_dir, paths) = files(&[("a1", &a1), ("b1", &b1), ("a2", &a2)]);
        let found = chains(&paths).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(names(&found[0]), ["a"]);
        assert_eq!(found[0].files, [paths[0].clone(), paths[2].clone()]);
        assert_eq!(names(&found[1]), ["b"]);
        assert!(verify(&found[1].files).unwrap().findings.is_empty());
        let report = verify(&found[0].files).unwrap();
        assert!(report.tampered(), "{:?}", report.findings);
    }

    fn check(lines: &[String], tail: &str) -> Report {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit-1.jsonl");
        std::fs::write(&path, format!("{}\n{tail}", lines.join("\n"))).unwrap();
        verify(&[path]).unwrap()
    }

    #[test]
    fn an_intact_chain_verifies() {
        let r = check(&chain(5), "");
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.records, 5);
        assert_eq!(r.anchored_at, None);
    }

    #[test]
    fn edits_removals_reorders_and_torn_tails_are_found() {
        let mut edited = chain(5);
        edited[2] = edited[2].replace("\"item\"", "\"itEm\"");
        assert_eq!(check(&edited, "").findings[0].problem, Problem::Edited);
        assert_eq!(check(&edited, "").findings[0].line, 3);

        let mut removed = chain(5);
        removed.remove(2);
        assert_eq!(
            check(&removed, "").findings[0].problem,
            Problem::Removed {
                missing_from: 2,
                missing_to: 2
            }
        );

        let mut reordered = chain(5);
        reordered.swap(1, 3);
        assert_eq!(
            check(&reordered, "").findings[0].problem,
            Problem::Removed {
                missing_from: 1,
                missing_to: 2
            }
        );
        assert!(check(&reordered, "")
            .findings
            .iter()
            .any(|f| f.problem == Problem::Reordered));

        let r = check(&chain(3), "{\"seq\":3,\"ev");
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].problem, Problem::TornTail);
        assert!(!r.tampered());
    }

    #[test]
    fn a_replaced_record_breaks_the_chain_even_when_resealed() {
        let mut lines = chain(4);
        // Re-seal an edited record: its own hash is right again, but the
        // next record's `prev` no longer matches.
        let v: Value = serde_json::from_str(&lines[1]).unwrap();
        let (forged, _) = seal(&format!(
            "{{\"seq\":1,\"event\":\"forged\",\"prev\":\"{}\"}}",
            v["prev"].as_str().unwrap()
        ));
        lines[1] = forged;
        let r = check(&lines, "");
        assert_eq!(r.findings[0].problem, Problem::ChainBroken);
        assert_eq!(r.findings[0].seq, Some(2));
    }

    #[test]
    fn last_record_skips_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let lines = chain(3);
        std::fs::write(&path, format!("{}\n{{\"seq\":3,", lines.join("\n"))).unwrap();
        let (seq, _) = last_record(&path).unwrap().unwrap();
        assert_eq!(seq, 2);
    }
}
