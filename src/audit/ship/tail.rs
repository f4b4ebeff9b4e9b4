//! Following the audit files as the writer appends: complete lines only,
//! from a given seq on, across rotations and restarts.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::audit::chain;

/// One sealed record as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub seq: u64,
    pub hash: String,
    pub time: Option<String>,
    /// The line without its newline.
    pub text: Vec<u8>,
}

#[derive(Deserialize)]
struct Head {
    seq: u64,
    hash: String,
    #[serde(default)]
    time: Option<String>,
}

impl Line {
    fn parse(text: Vec<u8>) -> Option<Line> {
        let head: Head = serde_json::from_slice(&text).ok()?;
        Some(Line {
            seq: head.seq,
            hash: head.hash,
            time: head.time,
            text,
        })
    }
}

/// Where the tail reads.
#[derive(Debug)]
pub struct Tail {
    dir: PathBuf,
    file: Option<PathBuf>,
    offset: u64,
    next: u64,
    /// The current file ends in an incomplete line at this offset.
    torn: bool,
    /// Warnings for the caller to log (torn lines skipped, gaps).
    pub notes: Vec<String>,
}

impl Tail {
    pub fn new(dir: &Path, next: u64) -> Tail {
        Tail {
            dir: dir.to_path_buf(),
            file: None,
            offset: 0,
            next,
            torn: false,
            notes: Vec::new(),
        }
    }

    /// The seq the next line read will have.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Up to `max` complete records from the next seq on, in order.
    pub fn read(&mut self, max: usize) -> std::io::Result<Vec<Line>> {
        let mut out = Vec::new();
        while out.len() < max {
            let files = chain::files_in(&self.dir)?;
            let current = match &self.file {
                Some(f) => f.clone(),
                None => {
                    // The newest file that starts at or before the next seq.
                    let Some(f) = files
                        .iter()
                        .rev()
                        .find(|f| chain::first_seq_in_name(f).is_some_and(|s| s <= self.next))
                        .or(files.first())
                        .cloned()
                    else {
                        return Ok(out);
                    };
                    self.file = Some(f.clone());
                    self.offset = 0;
                    f
                }
            };
            // Looked up before reading: once a newer file exists, the
            // writer has finished this one, so reading it to its end
            // reads all of it.
            let newer = files.iter().find(|f| **f > current).cloned();
            let at_end = self.read_file(&current, max, &mut out)?;
            if !at_end {
                break;
            }
            match newer {
                Some(n) => {
                    if self.torn {
                        self.notes.push(format!(
                            "{}: incomplete last line at byte {} (a write cut short by a crash) not sent",
                            current.display(),
                            self.offset
                        ));
                    }
                    self.file = Some(n);
                    self.offset = 0;
                }
                None => break,
            }
        }
        Ok(out)
    }

    /// Reads complete lines of `path` from the offset; true when it read
    /// to the end of the file (a torn last line left alone).
    fn read_file(&mut self, path: &Path, max: usize, out: &mut Vec<Line>) -> std::io::Result<bool> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            // Deleted by retention meanwhile: start over from the listing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.file = None;
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut reader = BufReader::new(file);
        let mut buf = Vec::new();
        loop {
            if out.len() >= max {
                return Ok(false);
            }
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf)?;
            self.torn = false;
            if n == 0 {
                return Ok(true);
            }
            if buf.last() != Some(&b'\n') {
                // A line still being written, or a crash's torn tail (which
                // the caller skips once a newer file shows it is final).
                self.torn = true;
                return Ok(true);
            }
            self.offset += n as u64;
            buf.pop();
            let Some(line) = Line::parse(buf.clone()) else {
                self.notes.push(format!(
                    "{}: a line before byte {} is not an audit record; skipped",
                    path.display(),
                    self.offset
                ));
                continue;
            };
            if line.seq < self.next {
                continue;
            }
            if line.seq > self.next {
                self.notes.push(format!(
                    "records {}..={} are not in the audit files (deleted?); continuing at {}",
                    self.next,
                    line.seq - 1,
                    line.seq
                ));
            }
            self.next = line.seq + 1;
            out.push(line);
        }
    }
}

/// The seq of the newest complete record, kept up to date by reading only
/// what was appended since the last look.
#[derive(Debug, Default)]
pub struct Newest {
    file: Option<PathBuf>,
    offset: u64,
    seq: Option<u64>,
}

impl Newest {
    pub fn update(&mut self, dir: &Path) -> std::io::Result<Option<u64>> {
        let files = chain::files_in(dir)?;
        let Some(last) = files.last() else {
            return Ok(self.seq);
        };
        if self.file.as_ref() != Some(last) {
            self.file = Some(last.clone());
            self.offset = 0;
        }
        let mut file = File::open(last)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut reader = BufReader::new(file);
        let mut buf = Vec::new();
        let mut newest = None;
        loop {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf)?;
            if n == 0 || buf.last() != Some(&b'\n') {
                break;
            }
            self.offset += n as u64;
            newest = Some(std::mem::take(&mut buf));
        }
        if let Some(line) = newest {
            buf = line;
            buf.pop();
            if let Some(l) = Line::parse(buf) {
                self.seq = Some(l.seq);
            }
        }
        Ok(self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn rec(seq: u64) -> String {
        format!("{{\"seq\":{seq},\"time\":\"2026-01-01T00:00:00.000Z\",\"prev\":\"p\",\"hash\":\"h{seq}\"}}\n")
    }

    fn seqs(lines: &[Line]) -> Vec<u64> {
        lines.iter().map(|l| l.seq).collect()
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn follows_rotation_and_waits_for_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("audit-000000000000-20260101T000000Z.jsonl");
        append(&a, &(rec(0) + &rec(1) + &rec(2)));
        let mut tail = Tail::new(dir.path(), 1);
        assert_eq!(seqs(&tail.read(10).unwrap()), [1, 2]);
        assert!(tail.read(10).unwrap().is_empty());
        // A line being written is not sent until it is complete.
        let r3 = rec(3);
        append(&a, &r3[..10]);
        assert!(tail.read(10).unwrap().is_empty());
        append(&a, &r3[10..]);
        let three = tail.read(10).unwrap();
        assert_eq!(seqs(&three), [3]);
        assert_eq!(three[0].text, r3.trim_end().as_bytes());
        assert_eq!(three[0].hash, "h3");
        // A crash tore seq 4; the restarted writer starts a new file that
        // continues at 4. The torn line is skipped.
        append(&a, &rec(4)[..15]);
        assert!(tail.read(10).unwrap().is_empty());
        let b = dir.path().join("audit-000000000004-20260101T000100Z.jsonl");
        append(&b, &(rec(4) + &rec(5)));
        assert_eq!(seqs(&tail.read(1).unwrap()), [4]);
        assert_eq!(seqs(&tail.read(10).unwrap()), [5]);
        // Rotation: the next file.
        let c = dir.path().join("audit-000000000006-20260101T000200Z.jsonl");
        append(&c, &rec(6));
        append(&b, ""); // nothing more in b
        assert_eq!(seqs(&tail.read(10).unwrap()), [6]);
        // A restart from a cursor in the middle of the second file.
        let mut again = Tail::new(dir.path(), 5);
        assert_eq!(seqs(&again.read(10).unwrap()), [5, 6]);
        // From the start, across all three, in batches.
        let mut all = Tail::new(dir.path(), 0);
        let mut got = Vec::new();
        loop {
            let batch = all.read(2).unwrap();
            if batch.is_empty() {
                break;
            }
            assert!(batch.len() <= 2);
            got.extend(seqs(&batch));
        }
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6]);
        let mut newest = Newest::default();
        assert_eq!(newest.update(dir.path()).unwrap(), Some(6));
        append(&c, &(rec(7) + &rec(8)[..5]));
        assert_eq!(newest.update(dir.path()).unwrap(), Some(7));
    }

    #[test]
    fn first_seq_comes_from_the_file_name() {
        assert_eq!(
            chain::first_seq_in_name(Path::new("/x/audit-000000001234-20260101T000000Z.jsonl")),
            Some(1234)
        );
        assert_eq!(chain::first_seq_in_name(Path::new("/x/other.jsonl")), None);
    }
}
