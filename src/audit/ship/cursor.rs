//! A sink's cursor file, `<audit.dir>/.sink-<name>.cursor`: the next seq
//! to send and, while a batch's delivery is unconfirmed, its range.
//!
//! ```text
//! next 1200
//! sending 1200..=1399
//! ```

use std::io::Write;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    /// The first record not yet confirmed delivered.
    pub next: u64,
    /// Sent or being sent, fate unknown until the collector closes.
    pub sending: Option<RangeInclusive<u64>>,
}

pub fn path(dir: &Path, sink: &str) -> PathBuf {
    dir.join(format!(".sink-{sink}.cursor"))
}

impl Cursor {
    pub fn parse(text: &str) -> Result<Cursor, String> {
        let mut next = None;
        let mut sending = None;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            match line.split_once(' ') {
                Some(("next", n)) => next = Some(number(n)?),
                Some(("sending", r)) => {
                    let (a, b) = r
                        .split_once("..=")
                        .ok_or_else(|| format!("\"{line}\": expected sending A..=B"))?;
                    sending = Some(number(a)?..=number(b)?);
                }
                _ => return Err(format!("\"{line}\": expected next N or sending A..=B")),
            }
        }
        Ok(Cursor {
            next: next.ok_or("no \"next N\" line")?,
            sending,
        })
    }

    pub fn render(&self) -> String {
        let mut s = format!("next {}\n", self.next);
        if let Some(r) = &self.sending {
            s.push_str(&format!("sending {}..={}\n", r.start(), r.end()));
        }
        s
    }

    /// Reads the cursor; a missing file is the start of the log.
    pub fn load(path: &Path) -> Result<Cursor, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Cursor::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Cursor::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Replaces the file atomically and durably: a temporary file, fsync,
    /// rename, fsync of the directory. A crash leaves the old or the new.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("cursor.tmp");
        let fail = |e: std::io::Error| format!("writing {}: {e}", path.display());
        let mut f = std::fs::File::create(&tmp).map_err(fail)?;
        f.write_all(self.render().as_bytes()).map_err(fail)?;
        f.sync_all().map_err(fail)?;
        std::fs::rename(&tmp, path).map_err(fail)?;
        if let Some(dir) = path.parent() {
            // Best effort, as for the audit files' directory entries.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

fn number(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("\"{s}\" is not a sequence number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_refuses_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path(), "siem");
        assert_eq!(Cursor::load(&p).unwrap(), Cursor::default());
        let c = Cursor {
            next: 1200,
            sending: Some(1200..=1399),
        };
        c.save(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "next 1200\nsending 1200..=1399\n"
        );
        assert_eq!(Cursor::load(&p).unwrap(), c);
        let done = Cursor {
            next: 1400,
            sending: None,
        };
        done.save(&p).unwrap();
        assert_eq!(Cursor::load(&p).unwrap(), done);
        assert!(!p.with_extension("cursor.tmp").exists());
        assert!(Cursor::parse("next x")
            .unwrap_err()
            .contains("not a sequence"));
        assert!(Cursor::parse("").unwrap_err().contains("no \"next N\""));
        assert!(Cursor::parse("next 1\nsending 3").is_err());
        assert!(Cursor::parse("bogus 1").is_err());
    }
}
