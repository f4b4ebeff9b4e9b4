//! Hostile connections: slow clients bounded by timeouts and cut off, idle
//! connections making room at the connection cap, and the real binary's
//! warning when no roles are configured.
//!
//! Found by the first hardening rounds (formerly tests/hardening.rs).

use crate::common;

use std::time::{Duration, Instant};

use common::{shared_agents, targets_toml, tenants_config, GatewayProcess};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const T: &str = "jmxgate.test:type=Types";

/// Reads until the peer closes or `within` passes; what came, and whether
/// it closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into(), false),
        }
    }
}

const BASIC_ANN: &str = "Authorization: Basic YW5uOmFubi1wdw=="; // ann:ann-pw

#[test]
fn slow_clients_are_cut_off_and_release_their_slots() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::gateway_toml(
        dir.path(),
        &tenants_config(
            dir.path(),
            // Both slots may be taken by callers not yet known: their
            // password checks are counted in the anonymous share.
            "header_read_timeout = \"1s\"\nbody_read_timeout = \"1s\"\n\
             max_concurrent_requests = 2\nmax_anonymous_requests = 2\nmax_connections = 6",
        ),
    );
    let gateway = GatewayProcess::start(&config, "info");
    let addr = gateway.addr.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // A request line that never ends: the connection is closed.
        let mut partial = TcpStream::connect(&addr).await.unwrap();
        partial.write_all(b"GET /jolokia/vers").await.unwrap();
        let (_, closed) = read_until_closed(&mut partial, Duration::from_secs(10)).await;
        assert!(closed, "a partial request line was kept open");

        // Bodies that trickle (a short Content-Length body and a chunked
        // one), as many as max_concurrent_requests: each gets 408 and
        // gives its slot back.
        let head = |extra: &str| {
            format!(
                "POST /jolokia/targets/alpha HTTP/1.1\r\nHost: {addr}\r\n{BASIC_ANN}\r\n\
                 Content-Type: application/json\r\n{extra}\r\n"
            )
        };
        let mut short = TcpStream::connect(&addr).await.unwrap();
        short
            .write_all(format!("{}{{\"type\":", head("Content-Length: 100\r\n")).as_bytes())
            .await
            .unwrap();
        let mut chunked = TcpStream::connect(&addr).await.unwrap();
        chunked
            .write_all(head("Transfer-Encoding: chunked\r\n").as_bytes())
            .await
            .unwrap();
        // A one-byte chunk every 200 ms: the slow client itself, no wait.
        let trickle = tokio::spawn(async move {
            for _ in 0..40 {
                if chunked.write_all(b"1\r\n \r\n").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            read_until_closed(&mut chunked, Duration::from_secs(10)).await
        });
        for (answer, closed) in [
            read_until_closed(&mut short, Duration::from_secs(10)).await,
            trickle.await.unwrap(),
        ] {
            assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
            assert!(answer.contains("server.body_read_timeout"), "{answer}");
            assert!(answer
                .to_ascii_lowercase()
                .contains("x-content-type-options: nosniff"));
            assert!(closed, "the connection stays open after 408: {answer}");
        }

        // Both slots are free again: a request is answered.
        let http = common::http_client();
        let answer = http
            .post(format!("http://{addr}/jolokia/targets/alpha"))
            .basic_auth("ann", Some("ann-pw"))
            .body(json!({"type":"read","mbean":T,"attribute":"Name"}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert!(answer.text().await.unwrap().contains("\"value\":\"alpha\""));
    });
    gateway.stop();
}

/// Sockets that are opened and send nothing (re-opened as soon as they are
/// closed) can't keep other clients out: at `server.max_connections` an
/// idle connection makes room for a new one, the never-used ones first,
/// while a connection busy with a request is left alone.
#[test]
fn idle_connections_make_room_at_the_connection_cap() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::gateway_toml(
        dir.path(),
        &format!(
            "{}\n[admin]\nlisten = \"127.0.0.1:0\"\n",
            tenants_config(
                dir.path(),
                "header_read_timeout = \"30s\"\nmax_connections = 6",
            )
        ),
    );
    let gateway = GatewayProcess::start(&config, "info");
    let addr = gateway.addr.clone();
    let admin = gateway
        .wait_for_line("admin listening on http://", Duration::from_secs(60))
        .expect("the admin listener's address in the log");
    let admin = admin
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = common::http_client();
        // One slow request holds its connection busy throughout.
        let slow = {
            let (http, addr) = (http.clone(), addr.clone());
            tokio::spawn(async move {
                http.post(format!("http://{addr}/jolokia/targets/alpha"))
                    .basic_auth("ann", Some("ann-pw"))
                    .body(
                        json!({"type":"exec","mbean":"jmxgate.test:type=Operations",
                               "operation":"sleep","arguments":[3000]})
                        .to_string(),
                    )
                    .send()
                    .await
                    .unwrap()
            })
        };
        // Busy once the gateway has a connection open to the agent (health
        // probes' own connections aside). A client of its own each time:
        // the admin listener is not under the cap, but no kept connection
        // should outlive the wait.
        common::eventually(
            "the slow request is under way at the agent",
            Duration::from_secs(60),
            || async {
                let text =
                    common::get_text(&common::http_client(), &format!("http://{admin}/metrics"))
                        .await;
                match common::metric_value(&text, "jmxgate_agent_connections") {
                    open if open > 0.0 => Ok(()),
                    _ => Err("no agent connection open".to_string()),
                }
            },
        )
        .await;
        // Twelve silent sockets, each re-opened as soon as it is closed.
        let opened = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let flood: Vec<_> = (0..12)
            .map(|_| {
                let (addr, opened) = (addr.clone(), opened.clone());
                tokio::spawn(async move {
                    loop {
                        let Ok(mut s) = TcpStream::connect(&addr).await else {
                            continue;
                        };
                        opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let mut buf = [0u8; 64];
                        let _ = s.read(&mut buf).await;
                    }
                })
            })
            .collect();
        // They fill the cap: a connection then waits for a place, which
        // the gateway says once.
        gateway
            .wait_for_line("server.max_connections reached", Duration::from_secs(60))
            .expect("a log line for the connection cap");
        // Fresh clients get in, each far sooner than the 30 s header
        // timeout that would otherwise free a place.
        for _ in 0..5 {
            let started = Instant::now();
            let answer = common::http_client()
                .get(format!("http://{addr}/jolokia/targets/alpha/read/{T}/Name"))
                .basic_auth("ann", Some("ann-pw"))
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 200);
            assert!(answer.text().await.unwrap().contains("\"value\":\"alpha\""));
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "waited {:?} for a place",
                started.elapsed()
            );
        }
        // The busy connection was not cut.
        let slow = slow.await.unwrap();
        assert_eq!(slow.status(), 200);
        assert!(slow.text().await.unwrap().contains("\"status\":200"));
        for task in flood {
            task.abort();
        }
        let reopened = opened.load(std::sync::atomic::Ordering::Relaxed);
        assert!(reopened > 12, "the idle sockets were closed to make room");
    });
    gateway.stop();
}

/// `jmxgate serve` itself: a gateway without roles says at start-up that
/// it is open to everyone (logging starts before the gateway is built).
#[test]
fn the_real_binary_warns_when_no_roles_are_configured() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let config = common::gateway_toml(dir.path(), &targets_toml(&[a]));
    let gateway = GatewayProcess::start(&config, "info");
    let _ = gateway
        .wait_for_line("no roles configured", Duration::from_secs(10))
        .expect("the open-gateway warning in the log");
    gateway.stop();
}
