//! A real HAProxy (Debian's `/usr/sbin/haproxy`) in front of several
//! gateway replicas, as a deployment puts a load balancer before them:
//! round robin over the replicas, plain TCP health checks (the gateway's
//! Jolokia door needs credentials, so an HTTP check can't be used) that
//! take a dead replica out within a second, and a failed connection
//! retried on another replica. Started in the foreground (`-db`) with a
//! config in a directory of its own; killed on drop.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Haproxy {
    child: Child,
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("HAProxy is not installed (scripts/install-deps.sh installs Debian's haproxy)")
        })
}

impl Haproxy {
    /// Starts HAProxy balancing over `servers`; returns once its frontend
    /// accepts connections.
    pub fn start(servers: &[SocketAddr]) -> Haproxy {
        assert!(
            !servers.is_empty(),
            "HAProxy needs a server to balance over"
        );
        let dir = tempfile::Builder::new()
            .prefix("jmxgate-haproxy")
            .tempdir()
            .unwrap();
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let backends: String = servers
            .iter()
            .enumerate()
            .map(|(i, s)| format!("    server replica{i} {s} check inter 500ms fall 1 rise 1\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 256\n\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 15s\n    \
             timeout server 15s\n    timeout check 2s\n    retries 3\n    option redispatch 1\n\n\
             frontend gateways\n    bind {addr}\n    default_backend replicas\n\n\
             backend replicas\n    balance roundrobin\n{backends}"
        );
        let cfg = dir.path().join("haproxy.cfg");
        std::fs::write(&cfg, config).unwrap();
        let check = Command::new(binary())
            .args(["-c", "-q", "-f"])
            .arg(&cfg)
            .output()
            .expect("run haproxy -c");
        assert!(
            check.status.success(),
            "haproxy -c rejects the test config: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let log = std::fs::File::create(dir.path().join("haproxy.log")).unwrap();
        let child = Command::new(binary())
            .args(["-db", "-f"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start haproxy");
        let mut haproxy = Haproxy { child, addr, dir };
        crate::common::eventually_blocking("HAProxy listens", Duration::from_secs(30), || {
            if TcpStream::connect(addr).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = haproxy.child.try_wait() {
                panic!("haproxy exited with {status}: {}", haproxy.log());
            }
            Err(haproxy.log())
        });
        haproxy
    }

    /// A URL of the frontend: `path` starts with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// What HAProxy wrote (warnings, a server going down), for messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
