//! DNS discovery against a real DNS server: hickory-server, authoritative
//! for `example.` from an in-memory zone, on 127.0.0.1 (UDP and TCP, an
//! ephemeral port). Records are changed while it runs; it counts the
//! queries it answers, so "no change reported" is checked after resolutions
//! that really happened.

use crate::common;

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_server::net::runtime::{Time, TokioRuntimeProvider};
use hickory_server::proto::op::ResponseCode;
use hickory_server::proto::rr::{LowerName, Name, RecordSet, RecordType, RrKey};
use hickory_server::proto::serialize::txt::Parser;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{
    AxfrPolicy, Catalog, MessageResponseBuilder, ZoneHandler, ZoneType,
};
use hickory_server::Server;
use jmxgate::config::TargetConfig;
use jmxgate::discovery::dns::watch_entry;
use jmxgate::discovery::{self, Change, DnsDiscovery, RecordKind};
use tokio::sync::mpsc;

const ORIGIN: &str = "example.";
const READ: &str = "/read/jmxgate.test:type=Types/Name";
const KAFKA: &str = "_jolokia._tcp.kafka.example.";
const WEB: &str = "web-headless.example.";

/// The zone: an SOA (TTL 1s) plus `records` in zone-file syntax, relative
/// to `example.`.
fn zone(records: &str) -> BTreeMap<RrKey, RecordSet> {
    let text = format!(
        "$ORIGIN example.\n$TTL 1\n@ IN SOA ns.example. admin.example. 1 60 60 60 1\n{records}\n"
    );
    let (_, records) = Parser::new(text, None, Some(Name::from_ascii(ORIGIN).unwrap()))
        .parse()
        .expect("test zone parses");
    records
}

/// Answers from the catalog and counts every query; answers SERVFAIL to
/// queries for the record type in `servfail`.
struct Counting {
    catalog: Catalog,
    queries: Arc<AtomicUsize>,
    servfail: Arc<Mutex<Option<RecordType>>>,
}

#[async_trait::async_trait]
impl RequestHandler for Counting {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        self.queries.fetch_add(1, Ordering::SeqCst);
        let servfail = *self.servfail.lock().unwrap();
        if let Some(failing) = servfail {
            if request
                .queries
                .queries()
                .iter()
                .any(|q| q.query_type() == failing)
            {
                let response = MessageResponseBuilder::new(&request.queries, None)
                    .error_msg(&request.metadata, ResponseCode::ServFail);
                return response_handle.send_response(response).await.unwrap();
            }
        }
        self.catalog
            .handle_request::<R, T>(request, response_handle)
            .await
    }
}

struct TestDns {
    addr: SocketAddr,
    zone: Arc<InMemoryZoneHandler<TokioRuntimeProvider>>,
    queries: Arc<AtomicUsize>,
    servfail: Arc<Mutex<Option<RecordType>>>,
    server: Server<Counting>,
}

impl TestDns {
    /// A server on a fresh port (UDP and TCP on the same number).
    async fn start(records: &str) -> TestDns {
        for _ in 0..50 {
            let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let addr = udp.local_addr().unwrap();
            if let Some(dns) = TestDns::start_on(addr, udp, records) {
                return dns;
            }
        }
        panic!("no port free for UDP and TCP at once");
    }

    /// A server on `addr` again (after [`TestDns::stop`]).
    async fn restart(addr: SocketAddr, records: &str) -> TestDns {
        let udp = tokio::net::UdpSocket::bind(addr).await.unwrap();
        TestDns::start_on(addr, udp, records).expect("TCP port free again")
    }

    fn start_on(addr: SocketAddr, udp: tokio::net::UdpSocket, records: &str) -> Option<TestDns> {
        let tcp = tokio::net::TcpSocket::new_v4().unwrap();
        tcp.set_reuseaddr(true).unwrap();
        tcp.bind(addr).ok()?;
        let tcp = tcp.listen(16).unwrap();
        let origin = Name::from_ascii(ORIGIN).unwrap();
        let zone = Arc::new(
            InMemoryZoneHandler::<TokioRuntimeProvider>::new(
                origin.clone(),
                zone(records),
                ZoneType::Primary,
                AxfrPolicy::Deny,
            )
            .unwrap(),
        );
        let mut catalog = Catalog::new();
        catalog.upsert(
            LowerName::new(&origin),
            vec![zone.clone() as Arc<dyn ZoneHandler>],
        );
        let queries = Arc::new(AtomicUsize::new(0));
        let servfail = Arc::new(Mutex::new(None));
        let mut server = Server::new(Counting {
            catalog,
            queries: queries.clone(),
            servfail: servfail.clone(),
        });
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5), 64 * 1024);
        Some(TestDns {
            addr,
            zone,
            queries,
            servfail,
            server,
        })
    }

    /// Replaces every record of the zone (the server keeps running).
    async fn set_records(&self, records: &str) {
        let mut current = self.zone.records_mut().await;
        current.clear();
        for (key, set) in zone(records) {
            current.insert(key, Arc::new(set));
        }
    }

    /// Answers SERVFAIL to queries for `record_type` (None: stop that).
    fn servfail(&self, record_type: Option<RecordType>) {
        *self.servfail.lock().unwrap() = record_type;
    }

    async fn stop(mut self) -> SocketAddr {
        self.server.shutdown_gracefully().await.unwrap();
        self.addr
    }

    fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }

    /// Waits until the server has answered `n` more queries.
    async fn wait_for_queries(&self, n: usize) {
        let target = self.queries() + n;
        common::eventually(
            &format!("the server answers {n} more queries"),
            Duration::from_secs(60),
            || async {
                match self.queries() {
                    seen if seen >= target => Ok(()),
                    seen => Err(format!("{seen} of {target} queries")),
                }
            },
        )
        .await
    }

    /// An entry asking this server, quickly.
    fn entry(&self, name: &str) -> DnsDiscovery {
        let mut d = DnsDiscovery::new(name);
        d.nameserver = Some(self.addr.to_string());
        d.timeout = Some(Duration::from_millis(300));
        d.interval = Duration::from_millis(50);
        d
    }
}

fn names_and_urls(targets: &[TargetConfig]) -> Vec<(String, String)> {
    targets
        .iter()
        .map(|t| (t.name.clone(), t.url.clone()))
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(n, u)| (n.to_string(), u.to_string()))
        .collect()
}

const KAFKA_3: &str = "
_jolokia._tcp.kafka IN SRV 0 10 8778 Broker-1.kafka.example.
_jolokia._tcp.kafka IN SRV 0 10 8778 broker-0.kafka.example.
_jolokia._tcp.kafka IN SRV 10 5 9778 broker-2.kafka.example.
_jolokia._tcp.other IN SRV 0 0 1234 other.example.
broker-0.kafka IN A 192.0.2.10
";

#[tokio::test]
async fn srv_records_become_targets() {
    let dns = TestDns::start(KAFKA_3).await;
    let mut entry = dns.entry(KAFKA);
    entry.name_prefix = "kafka-".into();
    entry.labels.insert("app".into(), "kafka".into());
    std::sync::Arc::make_mut(&mut entry.agent).user = Some("monitor".into());
    std::sync::Arc::make_mut(&mut entry.agent).password_env = Some("KAFKA_PW".into());
    entry.validate().unwrap();
    assert_eq!(entry.record_kind(), RecordKind::Srv);

    let targets = entry.resolve().await.unwrap();
    assert_eq!(
        names_and_urls(&targets),
        pairs(&[
            (
                "kafka-broker-0.kafka.example-8778",
                "http://broker-0.kafka.example:8778/jolokia"
            ),
            (
                "kafka-broker-1.kafka.example-8778",
                "http://broker-1.kafka.example:8778/jolokia"
            ),
            (
                "kafka-broker-2.kafka.example-9778",
                "http://broker-2.kafka.example:9778/jolokia"
            ),
        ])
    );
    for t in &targets {
        assert_eq!(t.labels.get("app"), Some("kafka"));
        assert_eq!(t.labels.get("discovered_by"), Some("dns"));
        assert_eq!(t.agent.user.as_deref(), Some("monitor"));
        assert_eq!(t.agent.password_env.as_deref(), Some("KAFKA_PW"));
    }
    assert!(dns.queries() >= 1);

    // The same host and port twice (another priority) is one target; a
    // port in the entry does not apply to SRV answers.
    dns.set_records(
        "_jolokia._tcp.kafka IN SRV 0 0 8778 b0.example.\n_jolokia._tcp.kafka IN SRV 5 0 8778 b0.example.\n",
    )
    .await;
    entry.port = Some(1);
    let targets = entry.resolve().await.unwrap();
    assert_eq!(
        names_and_urls(&targets),
        pairs(&[("kafka-b0.example-8778", "http://b0.example:8778/jolokia")])
    );
}

#[tokio::test]
async fn a_and_aaaa_records_with_the_configured_port() {
    let dns = TestDns::start(
        "
web-headless IN A 192.0.2.8
web-headless IN A 192.0.2.7
web-headless IN AAAA 2001:db8::7
v6-only IN AAAA 2001:db8::1:2
",
    )
    .await;
    let mut entry = dns.entry(WEB);
    entry.port = Some(8778);
    entry.scheme = discovery::Scheme::Https;
    entry.path = "/actuator/jolokia".into();
    entry.name_prefix = "web-".into();
    assert_eq!(entry.record_kind(), RecordKind::A);
    let targets = entry.resolve().await.unwrap();
    assert_eq!(
        names_and_urls(&targets),
        pairs(&[
            (
                "web-192.0.2.7-8778",
                "https://192.0.2.7:8778/actuator/jolokia"
            ),
            (
                "web-192.0.2.8-8778",
                "https://192.0.2.8:8778/actuator/jolokia"
            ),
            (
                "web-2001-db8--7-8778",
                "https://[2001:db8::7]:8778/actuator/jolokia"
            ),
        ])
    );

    // Only AAAA records: the empty A answer is no error.
    let mut v6 = dns.entry("v6-only.example.");
    v6.port = Some(9000);
    let targets = v6.resolve().await.unwrap();
    assert_eq!(
        names_and_urls(&targets),
        pairs(&[("2001-db8--1-2-9000", "http://[2001:db8::1:2]:9000/jolokia")])
    );

    // record = "a" for a name that looks like a service.
    dns.set_records("_svc IN A 192.0.2.1\n").await;
    let mut forced = dns.entry("_svc.example.");
    forced.record = Some(RecordKind::A);
    forced.port = Some(1);
    assert_eq!(
        names_and_urls(&forced.resolve().await.unwrap()),
        pairs(&[("192.0.2.1-1", "http://192.0.2.1:1/jolokia")])
    );
}

#[tokio::test]
async fn missing_names_and_records_are_clear_errors() {
    let dns = TestDns::start("txt-only IN TXT \"hello\"\nweb IN A 192.0.2.1\n").await;

    let err = dns
        .entry("_jolokia._tcp.missing.example.")
        .resolve()
        .await
        .unwrap_err();
    assert!(err.contains("\"_jolokia._tcp.missing.example.\""), "{err}");
    assert!(err.contains("SRV"), "{err}");
    assert!(err.contains("NXDOMAIN"), "{err}");
    assert!(err.contains(&dns.addr.to_string()), "{err}");

    let mut a = dns.entry("missing.example.");
    a.port = Some(8778);
    let err = a.resolve().await.unwrap_err();
    assert!(err.contains("\"missing.example.\""), "{err}");
    assert!(err.contains("NXDOMAIN"), "{err}");

    // The name exists, with other records only.
    let mut srv = dns.entry("txt-only.example.");
    srv.record = Some(RecordKind::Srv);
    let err = srv.resolve().await.unwrap_err();
    assert!(err.contains("no SRV records"), "{err}");
    let mut a = dns.entry("txt-only.example.");
    a.port = Some(1);
    let err = a.resolve().await.unwrap_err();
    assert!(err.contains("no A or AAAA records"), "{err}");
}

#[tokio::test]
async fn a_failing_address_family_fails_the_whole_resolution() {
    let dns =
        TestDns::start("web-headless IN A 192.0.2.1\nweb-headless IN AAAA 2001:db8::1\n").await;
    let mut web = dns.entry(WEB);
    web.port = Some(80);
    let both = pairs(&[
        ("192.0.2.1-80", "http://192.0.2.1:80/jolokia"),
        ("2001-db8--1-80", "http://[2001:db8::1]:80/jolokia"),
    ]);
    assert_eq!(names_and_urls(&web.resolve().await.unwrap()), both);

    dns.servfail(Some(RecordType::AAAA));
    let err = web.resolve().await.unwrap_err();
    assert!(err.contains("\"web-headless.example.\" (AAAA"), "{err}");
    assert!(err.contains("answered SERVFAIL"), "{err}");

    // Watching: the IPv4 half alone is not taken as the new set; the
    // entry says it fails.
    dns.servfail(None);
    let mut watch = Watch::start(web);
    assert_eq!(watch.next_change().await, both);
    assert!(watch.next_up().await, "resolves");
    dns.servfail(Some(RecordType::AAAA));
    dns.wait_for_queries(10).await;
    watch.no_change();
    assert!(!watch.next_up().await, "fails");
    dns.servfail(None);
    dns.set_records("web-headless IN AAAA 2001:db8::1\n").await;
    assert_eq!(
        watch.next_change().await,
        pairs(&[("2001-db8--1-80", "http://[2001:db8::1]:80/jolokia")])
    );
    assert!(watch.next_up().await, "resolves again");
}

#[tokio::test]
async fn a_silent_nameserver_is_a_timeout() {
    // Bound, never read: queries go unanswered.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut entry = DnsDiscovery::new(KAFKA);
    entry.nameserver = Some(silent.local_addr().unwrap().to_string());
    entry.timeout = Some(Duration::from_millis(200));
    let started = std::time::Instant::now();
    let err = entry.resolve().await.unwrap_err();
    assert!(err.contains(KAFKA), "{err}");
    assert!(err.contains("timed out"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
}

/// Log lines written while the guard lives (this thread only: the tests
/// run on a current-thread runtime).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let logs = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("jmxgate=info")
            .with_ansi(false)
            .with_writer(move || logs.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    async fn wait_for(&self, needle: &str) -> String {
        common::eventually(
            &format!("a log line with {needle:?}"),
            Duration::from_secs(60),
            || async {
                let text = self.text();
                if text.contains(needle) {
                    Ok(text)
                } else {
                    Err(text)
                }
            },
        )
        .await
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One entry's [`watch_entry`], as the gateway runs it for a source of
/// the fleet, and what it has sent that the test has not looked at yet.
struct Watch {
    task: tokio::task::JoinHandle<()>,
    events: mpsc::Receiver<Change>,
    /// `Change::Up`s received on the way to something else, oldest first.
    ups: VecDeque<bool>,
}

impl Watch {
    fn start(entry: DnsDiscovery) -> Watch {
        // Room for what a test leaves unread for a while (a send waits
        // when it is full, as it does while the fleet is busy).
        let (tx, events) = mpsc::channel(16);
        Watch {
            task: tokio::spawn(watch_entry(entry, tx)),
            events,
            ups: VecDeque::new(),
        }
    }

    async fn next(&mut self) -> Change {
        tokio::time::timeout(Duration::from_secs(20), self.events.recv())
            .await
            .expect("a change within 20s")
            .expect("watch still running")
    }

    /// The next whole listing it hands over.
    async fn next_change(&mut self) -> Vec<(String, String)> {
        loop {
            match self.next().await {
                Change::Restart(targets) => return names_and_urls(&targets),
                Change::Up(up) => self.ups.push_back(up),
                other => panic!("a DNS entry sent {other:?}"),
            }
        }
    }

    /// The next "it resolves" (true) or "it fails" (false) it says.
    async fn next_up(&mut self) -> bool {
        if let Some(up) = self.ups.pop_front() {
            return up;
        }
        match self.next().await {
            Change::Up(up) => up,
            other => panic!("a change came first: {other:?}"),
        }
    }

    /// No listing handed over since the last look.
    fn no_change(&mut self) {
        while let Ok(change) = self.events.try_recv() {
            match change {
                Change::Up(up) => self.ups.push_back(up),
                other => panic!("unexpected change reported: {other:?}"),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn watch_reports_each_change_once() {
    let dns = TestDns::start(
        "_jolokia._tcp.kafka IN SRV 0 0 8778 b0.example.\n_jolokia._tcp.kafka IN SRV 0 0 8778 b1.example.\n",
    )
    .await;
    let mut watch = Watch::start(dns.entry(KAFKA));

    let first = watch.next_change().await;
    assert_eq!(
        first,
        pairs(&[
            ("b0.example-8778", "http://b0.example:8778/jolokia"),
            ("b1.example-8778", "http://b1.example:8778/jolokia"),
        ])
    );
    // Several more resolutions of the same records: nothing reported.
    dns.wait_for_queries(5).await;
    watch.no_change();

    // One more record.
    dns.set_records(
        "_jolokia._tcp.kafka IN SRV 0 0 8778 b0.example.\n_jolokia._tcp.kafka IN SRV 0 0 8778 b1.example.\n_jolokia._tcp.kafka IN SRV 0 0 8778 b2.example.\n",
    )
    .await;
    assert_eq!(
        watch.next_change().await,
        pairs(&[
            ("b0.example-8778", "http://b0.example:8778/jolokia"),
            ("b1.example-8778", "http://b1.example:8778/jolokia"),
            ("b2.example-8778", "http://b2.example:8778/jolokia"),
        ])
    );
    dns.wait_for_queries(5).await;
    watch.no_change();

    // Same host, another port; and one gone.
    dns.set_records(
        "_jolokia._tcp.kafka IN SRV 0 0 9999 b0.example.\n_jolokia._tcp.kafka IN SRV 0 0 8778 b2.example.\n",
    )
    .await;
    assert_eq!(
        watch.next_change().await,
        pairs(&[
            ("b0.example-9999", "http://b0.example:9999/jolokia"),
            ("b2.example-8778", "http://b2.example:8778/jolokia"),
        ])
    );
    dns.wait_for_queries(5).await;
    watch.no_change();
    // That it resolves, said once (at the first resolution).
    assert_eq!(watch.ups, [true]);
}

/// Each entry is a watch of its own, as each is a source of the fleet: a
/// failing one hands over nothing (the fleet keeps what it gave last) and
/// says it fails; the other goes on as before.
#[tokio::test]
async fn a_failing_name_keeps_its_previous_targets() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let kafka_2 = "_jolokia._tcp.kafka IN SRV 0 0 8778 b0.example.\n_jolokia._tcp.kafka IN SRV 0 0 8778 b1.example.\n";
    let dns = TestDns::start(&format!("{kafka_2}web-headless IN A 192.0.2.1\n")).await;
    let mut web_entry = dns.entry(WEB);
    web_entry.port = Some(80);
    let mut kafka = Watch::start(dns.entry(KAFKA));
    let mut web = Watch::start(web_entry);

    assert_eq!(
        kafka.next_change().await,
        pairs(&[
            ("b0.example-8778", "http://b0.example:8778/jolokia"),
            ("b1.example-8778", "http://b1.example:8778/jolokia"),
        ])
    );
    assert!(kafka.next_up().await, "kafka resolves");
    assert_eq!(
        web.next_change().await,
        pairs(&[("192.0.2.1-80", "http://192.0.2.1:80/jolokia")])
    );

    // The SRV name disappears (NXDOMAIN): nothing is reported, the entry
    // says it fails, and the log says why.
    dns.set_records("web-headless IN A 192.0.2.1\n").await;
    let text = logs.wait_for("NXDOMAIN").await;
    assert!(
        text.contains("keeping the 2 target(s) found before")
            && text.contains("\"_jolokia._tcp.kafka.example.\""),
        "{text}"
    );
    dns.wait_for_queries(10).await;
    kafka.no_change();
    web.no_change();
    assert!(!kafka.next_up().await, "kafka fails");
    // Warned once, not once per round.
    assert_eq!(
        logs.text().matches("NXDOMAIN").count(),
        1,
        "{}",
        logs.text()
    );

    // The other name still changes; the failing one still reports nothing.
    dns.set_records("web-headless IN A 192.0.2.2\n").await;
    assert_eq!(
        web.next_change().await,
        pairs(&[("192.0.2.2-80", "http://192.0.2.2:80/jolokia")])
    );
    kafka.no_change();

    // Back, with one broker less.
    dns.set_records(
        "_jolokia._tcp.kafka IN SRV 0 0 8778 b1.example.\nweb-headless IN A 192.0.2.2\n",
    )
    .await;
    assert_eq!(
        kafka.next_change().await,
        pairs(&[("b1.example-8778", "http://b1.example:8778/jolokia")])
    );
    assert!(kafka.next_up().await, "kafka resolves again");
    logs.wait_for("DNS discovery resolves again").await;
    dns.wait_for_queries(6).await;
    kafka.no_change();
    web.no_change();
    assert!(kafka.ups.is_empty(), "{:?}", kafka.ups);
}

#[tokio::test]
async fn a_nameserver_going_away_keeps_the_targets_until_it_is_back() {
    let logs = Logs::default();
    let _guard = logs.capture();
    let dns = TestDns::start("_jolokia._tcp.kafka IN SRV 0 0 8778 b0.example.\n").await;
    let mut watch = Watch::start(dns.entry(KAFKA));
    assert_eq!(
        watch.next_change().await,
        pairs(&[("b0.example-8778", "http://b0.example:8778/jolokia")])
    );
    assert!(watch.next_up().await, "resolves");

    let addr = dns.stop().await;
    let text = logs.wait_for("keeping the 1 target(s) found before").await;
    assert!(text.contains(&format!("nameserver {addr}")), "{text}");
    assert!(!watch.next_up().await, "fails");
    // A few failing rounds (each at least one 300 ms try): still nothing
    // reported. (Not a wait for a condition: for nothing to happen.)
    tokio::time::sleep(Duration::from_millis(1500)).await;
    watch.no_change();

    // The server comes back on the same port, with other records.
    let dns = TestDns::restart(
        addr,
        "_jolokia._tcp.kafka IN SRV 0 0 8778 b0.example.\n_jolokia._tcp.kafka IN SRV 0 0 8778 b9.example.\n",
    )
    .await;
    assert_eq!(
        watch.next_change().await,
        pairs(&[
            ("b0.example-8778", "http://b0.example:8778/jolokia"),
            ("b9.example-8778", "http://b9.example:8778/jolokia"),
        ])
    );
    assert!(watch.next_up().await, "resolves again");
    dns.wait_for_queries(5).await;
    watch.no_change();
    assert!(watch.ups.is_empty(), "{:?}", watch.ups);
}

/// A watch ends when nobody listens any more (the gateway's discovery
/// task stopped), without waiting for its next round.
#[tokio::test]
async fn a_watch_ends_when_its_events_are_closed() {
    let dns = TestDns::start("_jolokia._tcp.kafka IN SRV 0 0 8778 b0.example.\n").await;
    let mut entry = dns.entry(KAFKA);
    entry.interval = Duration::from_secs(3600);
    let (tx, mut events) = mpsc::channel(16);
    let task = tokio::spawn(watch_entry(entry, tx));
    let first = tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("a change within 20s");
    assert!(matches!(first, Some(Change::Restart(_))), "{first:?}");
    drop(events);
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the watch ends")
        .unwrap();
}

/// The whole path: SRV records naming real agents become gateway targets,
/// reachable by name and by the `discovered_by=dns` selector, a changed
/// record set changes the fleet while the gateway serves, and an entry
/// that starts failing keeps its targets in the fleet.
#[tokio::test(flavor = "multi_thread")]
async fn discovered_agents_are_served_by_the_gateway() {
    let [alpha, beta, _] = common::shared_agents();
    let records = |ports: &[u16]| {
        ports
            .iter()
            .map(|p| format!("_jolokia._tcp.jvm IN SRV 0 0 {p} localhost.\n"))
            .collect::<String>()
    };
    let dns = TestDns::start(&records(&[alpha.port, beta.port])).await;
    let config = format!(
        "[health]\nprobe_interval = \"0s\"\n\
         [[discovery.dns]]\nname = \"_jolokia._tcp.jvm.example.\"\nnameserver = \"{}\"\n\
         interval = \"100ms\"\nname_prefix = \"jvm-\"\nlabels = {{ app = \"jvm\" }}\n",
        dns.addr
    );
    let gw = common::Gateway::start(&config).await;
    let _discovery = gw
        .gateway
        .spawn_discovery()
        .expect("an entry is configured");
    let read = serde_json::json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name",
        "target":{"url":"discovered_by=dns,app=jvm"}});
    let (a, b) = (
        format!("jvm-localhost-{}", alpha.port),
        format!("jvm-localhost-{}", beta.port),
    );
    let answer = common::eventually(
        "both agents are discovered",
        Duration::from_secs(60),
        || async {
            let (_, r) = gw.post("/jolokia", &read).await;
            if r["status"] == 200 {
                Ok(r)
            } else {
                Err(r.to_string())
            }
        },
    )
    .await;
    assert_eq!(
        answer["value"],
        serde_json::json!({ a.clone(): "alpha", b.clone(): "beta" }),
        "{answer}"
    );
    let (_, by_name) = gw
        .get(&format!(
            "/jolokia/targets/{b}/read/jmxgate.test:type=Types/Name"
        ))
        .await;
    assert_eq!(by_name["value"], "beta");

    // alpha leaves the record set, and the fleet.
    dns.set_records(&records(&[beta.port])).await;
    common::eventually(
        "alpha leaves the fleet",
        Duration::from_secs(60),
        || async {
            let (_, r) = gw.post("/jolokia", &read).await;
            if r["value"] == serde_json::json!({ b.clone(): "beta" }) {
                Ok(())
            } else {
                Err(r.to_string())
            }
        },
    )
    .await;

    // The entry starts failing (its server answers SERVFAIL): it says so,
    // and round after failing round the fleet keeps what it found last.
    dns.servfail(Some(RecordType::SRV));
    common::eventually(
        "the entry says it fails",
        Duration::from_secs(60),
        || async { discovery_up_is(&gw, "dns[0]", 0) },
    )
    .await;
    dns.wait_for_queries(5).await;
    let (_, r) = gw.post("/jolokia", &read).await;
    assert_eq!(
        r["value"],
        serde_json::json!({ b.clone(): "beta" }),
        "the failing entry's target stays: {r}"
    );
    let (_, by_name) = gw.get(&format!("/jolokia/targets/{b}{READ}")).await;
    assert_eq!(by_name["value"], "beta", "{by_name}");

    // Answering again, it is up again, with the same target.
    dns.servfail(None);
    common::eventually(
        "the entry says it resolves again",
        Duration::from_secs(60),
        || async { discovery_up_is(&gw, "dns[0]", 1) },
    )
    .await;
    let (_, r) = gw.post("/jolokia", &read).await;
    assert_eq!(r["value"], serde_json::json!({ b: "beta" }), "{r}");
}

/// Whether the gateway's `jmxgate_discovery_up` for `source` is `up`;
/// else its `discovery_up` lines.
fn discovery_up_is(gw: &common::Gateway, source: &str, up: u8) -> Result<(), String> {
    let text = gw.gateway.metrics().encode();
    if text.contains(&format!("jmxgate_discovery_up{{source=\"{source}\"}} {up}")) {
        Ok(())
    } else {
        Err(text
            .lines()
            .filter(|l| l.contains("discovery_up"))
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

/// The origin `GET /jolokia/targets` gives the target `name`.
async fn origin_of(gw: &common::Gateway, name: &str) -> Option<String> {
    let (_, list) = gw.get("/jolokia/targets").await;
    list["value"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
        .map(|t| t["origin"].as_str().unwrap_or_default().to_string())
}

/// One collision rule for every source: a name two DNS entries find is
/// kept by the first entry, a name an inventory file and a DNS entry give
/// is kept by the inventory (configured targets first, then inventory
/// files, then DNS entries, then Kubernetes entries), and each name a
/// source loses is counted.
#[tokio::test(flavor = "multi_thread")]
async fn a_name_two_sources_give_is_kept_by_the_first_in_the_rule() {
    let [alpha, beta, gamma] = common::shared_agents();
    let dns = TestDns::start(&format!(
        "_jolokia._tcp.one IN SRV 0 0 {a} localhost.\n\
         _jolokia._tcp.two IN SRV 0 0 {a} localhost.\n\
         _jolokia._tcp.two IN SRV 0 0 {b} localhost.\n",
        a = alpha.port,
        b = beta.port
    ))
    .await;
    let (on_alpha, on_beta) = (
        format!("jvm-localhost-{}", alpha.port),
        format!("jvm-localhost-{}", beta.port),
    );
    let dir = tempfile::tempdir().unwrap();
    // The inventory names beta's port after gamma's agent.
    std::fs::write(
        dir.path().join("fleet.yaml"),
        format!("- name: {on_beta}\n  url: {}\n", gamma.url()),
    )
    .unwrap();
    let entry = |name: &str| {
        format!(
            "[[discovery.dns]]\nname = \"{name}\"\nnameserver = \"{}\"\ninterval = \"100ms\"\n\
             timeout = \"2s\"\nname_prefix = \"jvm-\"\n",
            dns.addr
        )
    };
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[health]\nprobe_interval = \"0s\"\n\
             [[inventory]]\ntargets_file = \"fleet.yaml\"\n{}{}",
            entry("_jolokia._tcp.one.example."),
            entry("_jolokia._tcp.two.example.")
        ),
    )
    .unwrap();
    let gw = common::Gateway::start_from_file(&config).await;
    let _discovery = gw.gateway.spawn_discovery().expect("entries configured");
    let shadowed = "jmxgate_discovery_shadowed_targets{source=\"dns[1]\"} 2";
    common::eventually(
        "both DNS entries are folded in",
        Duration::from_secs(60),
        || async {
            let text = gw.gateway.metrics().encode();
            if text.contains(shadowed) {
                Ok(())
            } else {
                Err(text)
            }
        },
    )
    .await;
    // dns[0] and dns[1] find one name: dns[0] keeps it.
    assert_eq!(
        origin_of(&gw, &on_alpha).await.as_deref(),
        Some("discovery.dns[0]")
    );
    let (_, r) = gw.get(&format!("/jolokia/targets/{on_alpha}{READ}")).await;
    assert_eq!(r["value"], "alpha", "{r}");
    // The inventory and dns[1] give one name: the inventory's target is it.
    assert_eq!(origin_of(&gw, &on_beta).await.as_deref(), Some("inventory"));
    let (_, r) = gw.get(&format!("/jolokia/targets/{on_beta}{READ}")).await;
    assert_eq!(r["value"], "gamma", "{r}");
    let text = gw.gateway.metrics().encode();
    for line in [
        "jmxgate_discovery_shadowed_targets{source=\"dns[0]\"} 0",
        "jmxgate_discovery_shadowed_targets{source=\"inventory:",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }

    // dns[0] loses the name: dns[1]'s target takes its place.
    dns.set_records(&format!(
        "_jolokia._tcp.two IN SRV 0 0 {a} localhost.\n\
         _jolokia._tcp.two IN SRV 0 0 {b} localhost.\n\
         _jolokia._tcp.one IN SRV 0 0 {g} localhost.\n",
        a = alpha.port,
        b = beta.port,
        g = gamma.port
    ))
    .await;
    common::eventually(
        "dns[1] keeps the name dns[0] let go",
        Duration::from_secs(60),
        || async {
            match origin_of(&gw, &on_alpha).await {
                Some(o) if o == "discovery.dns[1]" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let (_, r) = gw.get(&format!("/jolokia/targets/{on_alpha}{READ}")).await;
    assert_eq!(r["value"], "alpha", "{r}");
}

/// `jmxgate_discovery_up` per DNS entry, on a real admin listener: 1 for
/// the entry whose server answers, 0 for the one whose server never does
/// (a socket of this test's that reads nothing), and 1 for the
/// configuration.
#[tokio::test(flavor = "multi_thread")]
async fn each_dns_entry_says_on_metrics_whether_it_resolves() {
    let [alpha, ..] = common::shared_agents();
    let dns = TestDns::start(&format!(
        "_jolokia._tcp.jvm IN SRV 0 0 {} localhost.\n",
        alpha.port
    ))
    .await;
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let entry = |server: SocketAddr| {
        format!(
            "[[discovery.dns]]\nname = \"_jolokia._tcp.jvm.example.\"\nnameserver = \"{server}\"\n\
             interval = \"100ms\"\ntimeout = \"300ms\"\n"
        )
    };
    let gw = common::Gateway::start(&format!(
        "[health]\nprobe_interval = \"0s\"\n{}{}",
        entry(dns.addr),
        entry(silent.local_addr().unwrap())
    ))
    .await;
    let _discovery = gw.gateway.spawn_discovery().expect("entries configured");
    let admin_config: jmxgate::admin::config::AdminConfig =
        toml::from_str("listen = \"127.0.0.1:0\"").unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = listener.local_addr().unwrap();
    tokio::spawn(jmxgate::admin::serve(
        listener,
        jmxgate::admin::router(gw.gateway.clone(), &admin_config),
        std::future::pending(),
    ));
    let http = common::http_client();
    let wanted = [
        "jmxgate_discovery_up{source=\"dns[0]\"} 1",
        "jmxgate_discovery_up{source=\"dns[1]\"} 0",
        "jmxgate_discovery_up{source=\"config\"} 1",
    ];
    common::eventually(
        "each entry's jmxgate_discovery_up",
        Duration::from_secs(60),
        || async {
            let text = common::get_text(&http, &format!("http://{admin}/metrics")).await;
            if wanted.iter().all(|w| text.contains(w)) {
                Ok(())
            } else {
                Err(text)
            }
        },
    )
    .await;
    // The entry that resolves is served beside the one that doesn't.
    let (_, r) = gw
        .get(&format!("/jolokia/targets/localhost-{}{READ}", alpha.port))
        .await;
    assert_eq!(r["value"], "alpha", "{r}");
    drop(silent);
}
