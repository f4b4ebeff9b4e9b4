//! A real PostgreSQL server (Debian's), started by the test in a
//! directory of its own on a free port, with password authentication
//! over TCP. Run as the `postgres` user when the tests run as root (the
//! server refuses root).

// Shared by the test binaries; not every one restarts its server.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Postgres {
    child: Child,
    pub port: u16,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

pub const USER: &str = "jmxgate";
pub const PASSWORD: &str = "s3cret-pg";

fn bin(name: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (scripts/install-deps.sh installs Debian's postgresql)")
        .filter_map(|e| Some(e.ok()?.path().join("bin").join(name)))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found
        .pop()
        .unwrap_or_else(|| panic!("no PostgreSQL {name} under /usr/lib/postgresql"))
}

/// `program` as the `postgres` user when we are root.
fn as_owner(program: &Path) -> Command {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// The server on `port`, its socket in `socket_dir`.
fn postmaster(data: &Path, port: u16, socket_dir: &Path) -> Child {
    as_owner(&bin("postgres"))
        .arg("-D")
        .arg(data)
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
        .arg("-k")
        .arg(socket_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Postgres {
    pub fn start() -> Postgres {
        let dir = tempfile::Builder::new()
            .prefix("jmxgate-pg")
            .tempdir()
            .unwrap();
        let data = dir.path().join("data");
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success());
        }
        let init = as_owner(&bin("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(
            init.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = postmaster(&data, port, dir.path());
        let pg = Postgres {
            child,
            port,
            data,
            _dir: dir,
        };
        pg.wait_listening();
        pg
    }

    fn wait_listening(&self) {
        let port = self.port;
        crate::common::eventually_blocking("PostgreSQL listens", Duration::from_secs(60), || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .map(drop)
                .map_err(|e| e.to_string())
        });
    }

    /// Starts the server again after [`kill`](Self::kill), on the same
    /// port and data (what was committed is there); waits until it
    /// listens.
    pub fn restart(&mut self) {
        self.child = postmaster(&self.data, self.port, self._dir.path());
        self.wait_listening();
    }

    /// The URL of its `postgres` database, with the password.
    pub fn url(&self) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// Stops the server at once (as a crash would).
    pub fn kill(&mut self) {
        // The child may be runuser: the postmaster's own pid is in its
        // pid file. Its backends end with it.
        if let Some(pid) = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next()?.trim().parse::<i32>().ok())
        {
            // The backends first (a backend notices its postmaster's death
            // only at its next wait, and may answer one more query).
            let children: Vec<i32> = std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    let child: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
                    let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
                    // The parent is the second field after the name's ")".
                    let parent: i32 = stat
                        .rsplit(')')
                        .next()?
                        .split_whitespace()
                        .nth(1)?
                        .parse()
                        .ok()?;
                    (parent == pid).then_some(child)
                })
                .collect();
            // SAFETY: kill has no memory preconditions.
            unsafe {
                libc::kill(pid, libc::SIGSTOP);
                for child in children {
                    libc::kill(child, libc::SIGKILL);
                }
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
    }
}
