//! The `jmxgate` command: `serve` runs the gateway, `check-config` checks a
//! configuration file without starting anything.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use jmxgate::config::ConfigSource;
use jmxgate::{pipeline, Config, Gateway};

// Many small allocations per request from several threads: glibc's malloc
// spent a sixth of the gateway's CPU under load (perf, bench/run.sh).
// `--features system-allocator` leaves it out, for heap profilers
// (heaptrack) that see only malloc.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "jmxgate",
    version,
    about = "A Jolokia gateway for a fleet of JVMs",
    after_help = "The manual: docs/introduction.md in the source (mdbook build docs makes it a book)."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the gateway.
    #[command(
        after_help = "Manual: docs/getting-started.md; reload, signals and limits: docs/operations.md"
    )]
    Serve {
        /// TOML configuration files, merged by their `order` value (repeat
        /// the flag for several).
        #[arg(
            short,
            long,
            env = "JMXGATE_CONFIG",
            default_value = "config/gateway.toml",
            value_delimiter = ','
        )]
        config: Vec<PathBuf>,
        /// Override one setting: --set server.listen=0.0.0.0:8080 (after
        /// the files and the JMXGATE__ environment overrides).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Log format on stderr; overrides `log.format`.
        #[arg(long, value_enum)]
        log_format: Option<LogFormat>,
    },
    /// Check a configuration file and report every problem in it.
    #[command(
        after_help = "Manual: docs/configuration.md (every key, its default, whether it reloads)"
    )]
    CheckConfig {
        /// TOML configuration files, merged by their `order` value.
        #[arg(required = true)]
        config: Vec<PathBuf>,
        /// Override one setting, as for `serve`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Hash a password for the users file (argon2id; --bcrypt for bcrypt).
    /// Reads the password from the first line of standard input.
    #[command(after_help = "Manual: docs/authentication.md (the users file)")]
    HashPassword {
        /// Make a bcrypt hash instead of argon2id.
        #[arg(long)]
        bcrypt: bool,
    },
    /// Check and search audit files.
    #[command(after_help = AUDIT_HELP)]
    Audit {
        #[command(subcommand)]
        command: AuditCmd,
    },
    /// Work with restrictor policies (jolokia-access.xml format).
    #[command(after_help = POLICY_HELP)]
    Policy {
        #[command(subcommand)]
        command: PolicyCmd,
    },
    /// An MCP server on standard input and output that forwards to a
    /// gateway's MCP endpoint (for assistants that start local servers).
    /// --url is the gateway (its base, Jolokia or MCP URL); credentials and
    /// TLS settings as for the client commands.
    #[command(after_help = "Manual: docs/mcp.md")]
    Mcp {
        #[command(flatten)]
        conn: jmxgate::cli::ConnectOpts,
    },
    /// Just-in-time access at a gateway: ask for a role for a while, list,
    /// show, approve, deny or revoke requests (--url is the gateway; the
    /// same credentials and TLS options as the client commands).
    #[command(after_help = jmxgate::cli::access::ACCESS_HELP)]
    Access {
        #[command(subcommand)]
        command: jmxgate::cli::access::AccessCmd,
    },
    #[command(flatten)]
    Client(jmxgate::cli::ClientCmd),
}

const AUDIT_HELP: &str = "Manual: docs/audit.md";
const POLICY_HELP: &str = "Manual: docs/access-control.md";

#[derive(Subcommand)]
enum AuditCmd {
    /// Verify each hash chain in the files (one per log, across replica ids
    /// where a gateway continued it under a new one): report the first
    /// edited, removed or reordered record, and a truncated tail; with
    /// --public-key, also every signed checkpoint. Exit status 0 intact (a
    /// truncated tail is a warning), 1 tampered, a bad signature, or (with
    /// --public-key) a replica without checkpoints, 2 unreadable.
    #[command(after_help = AUDIT_HELP)]
    Verify {
        /// Audit files or directories (their audit-*.jsonl files); files of
        /// several replicas may be given together.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// A public key (the FILE.pub of `audit keygen`) that checkpoints
        /// may be signed with; repeat it for keys used before a rotation.
        /// Makes checkpoints required.
        #[arg(long = "public-key", value_name = "FILE")]
        public_keys: Vec<PathBuf>,
    },
    /// Make an Ed25519 key for signing checkpoints (audit.signing_key_file):
    /// writes the private key to FILE (mode 0600) and the public key to
    /// FILE.pub, and prints the key id. Never overwrites.
    #[command(after_help = AUDIT_HELP)]
    Keygen {
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Print the records that match every given filter.
    #[command(after_help = AUDIT_HELP)]
    Query {
        /// Audit files or directories.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        principal: Option<String>,
        #[arg(long)]
        target: Option<String>,
        /// Request type: read, write, exec, search, list, version.
        #[arg(long = "type")]
        kind: Option<String>,
        /// allowed, denied or invalid.
        #[arg(long, value_parser = ["allowed", "denied", "invalid"])]
        decision: Option<String>,
        /// item, auth_failure, target_list, log_opened, log_closed, checkpoint,
        /// or a step of an access request: access_requested, access_reviewed,
        /// access_granted, access_denied, access_revoked, access_expired.
        #[arg(long)]
        event: Option<String>,
        /// mcp (AI assistants' tool calls) or jolokia (everything else).
        #[arg(long, value_parser = ["mcp", "jolokia"])]
        channel: Option<String>,
        /// From this time on (2026-11-22T10:00:00Z).
        #[arg(long)]
        since: Option<String>,
        /// Up to this time.
        #[arg(long)]
        until: Option<String>,
        /// One access request from ask to use: its access_* records and the
        /// items that asked for approval or ran on it.
        #[arg(long, value_name = "ID")]
        access_request: Option<String>,
        #[arg(long, value_enum, default_value_t = QueryFormat::Table)]
        format: QueryFormat,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum QueryFormat {
    Table,
    Json,
}

#[derive(Subcommand)]
enum PolicyCmd {
    /// Decide one request against a policy: prints `allow` or `deny` and the
    /// rule that decided. Exit status 0 allow, 1 deny, 2 bad policy or request.
    #[command(after_help = POLICY_HELP)]
    Check {
        /// The policy file.
        #[arg(long)]
        policy: PathBuf,
        /// The Jolokia request as JSON, e.g.
        /// '{"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage"}'.
        #[arg(long)]
        request: String,
        /// The client address `<remote>` sees (repeat for a forwarded chain).
        #[arg(long, default_value = "127.0.0.1")]
        remote: Vec<String>,
        /// The HTTP method the request arrives with.
        #[arg(long, default_value = "POST", value_parser = ["GET", "POST", "get", "post"])]
        method: String,
        /// The Origin header, for `<cors>` strict checking.
        #[arg(long)]
        origin: Option<String>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
    Quiet,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // One TLS crypto provider for the whole process (agents over HTTPS).
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        Cmd::CheckConfig { config, sets } => check_config(&ConfigSource {
            files: config,
            sets,
        }),
        Cmd::HashPassword { bcrypt } => hash_password(bcrypt),
        Cmd::Audit {
            command: AuditCmd::Verify { files, public_keys },
        } => audit_verify(&files, &public_keys),
        Cmd::Audit {
            command: AuditCmd::Keygen { out },
        } => audit_keygen(&out),
        Cmd::Audit {
            command:
                AuditCmd::Query {
                    files,
                    principal,
                    target,
                    kind,
                    decision,
                    event,
                    channel,
                    since,
                    until,
                    access_request,
                    format,
                },
        } => {
            let parse =
                |t: Option<String>| t.map(|t| jmxgate::audit::query::parse_time(&t)).transpose();
            let (since, until) = match (parse(since), parse(until)) {
                (Ok(s), Ok(u)) => (s, u),
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!("jmxgate: {e}");
                    return ExitCode::from(2);
                }
            };
            let filter = jmxgate::audit::query::Filter {
                principal,
                target,
                kind,
                decision,
                event,
                channel,
                since,
                until,
                access_request,
            };
            audit_query(&files, &filter, format)
        }
        Cmd::Policy {
            command:
                PolicyCmd::Check {
                    policy,
                    request,
                    remote,
                    method,
                    origin,
                },
        } => policy_check(&policy, &request, &remote, &method, origin.as_deref()),
        Cmd::Mcp { conn } => on_one_thread(jmxgate::cli::mcp_bridge::run(conn)),
        Cmd::Access { command } => on_one_thread(jmxgate::cli::access::run(command)),
        Cmd::Client(command) => on_one_thread(jmxgate::cli::run(command)),
        Cmd::Serve {
            config,
            sets,
            log_format,
        } => serve_command(
            ConfigSource {
                files: config,
                sets,
            },
            log_format,
        ),
    }
}

/// `jmxgate check-config`: the configuration's problems, or a summary.
fn check_config(source: &ConfigSource) -> ExitCode {
    match check(source) {
        Ok((config, _)) => {
            for warning in config.0.discovery.warnings() {
                eprintln!(
                    "jmxgate: warning: {}: {warning}",
                    config_path_display(&config)
                );
            }
            // Every source's targets as listed (a name two give counts twice).
            let targets = config.0.targets.len()
                + config
                    .0
                    .inventory_targets
                    .iter()
                    .map(Vec::len)
                    .sum::<usize>();
            let roles = config.0.roles.len();
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            let server = &config.0.server;
            let listeners: Vec<String> = server
                .listen
                .map(|a| format!("http://{a}"))
                .into_iter()
                .chain(server.tls.as_ref().map(|t| format!("https://{}", t.listen)))
                .collect();
            println!(
                "{}: OK ({targets} target{}, {roles} role{}, listening on {})",
                config_path_display(&config),
                plural(targets),
                plural(roles),
                listeners.join(" and ")
            );
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("jmxgate: {msg}");
            ExitCode::from(2)
        }
    }
}

/// A client command or the stdio bridge, on a runtime of one thread.
fn on_one_thread(command: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(command),
        Err(e) => {
            eprintln!("jmxgate: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `jmxgate serve`.
fn serve_command(source: ConfigSource, log_format: Option<LogFormat>) -> ExitCode {
    let config = match source.load() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("jmxgate: {e}");
            return ExitCode::from(2);
        }
    };
    // Logging first, then the runtime, then the gateway: building it
    // starts background tasks (the OpenID provider's key refresh) and logs
    // warnings, which need both to exist.
    init_logging(log_format, &config);
    open_files_limit(&config);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jmxgate: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let built = {
        let _in_runtime = runtime.enter();
        build(config, source)
    };
    let (config, gateway) = match built {
        Ok(built) => built,
        Err(msg) => {
            eprintln!("jmxgate: {msg}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(serve(config, gateway)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("jmxgate: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// Raises the open-files limit and warns when it stays below what the
/// configuration may hold open.
fn open_files_limit(config: &Config) {
    match jmxgate::open_files::raise_to_hard_limit() {
        Ok(limit) => {
            let needed = jmxgate::open_files::needed(&config.server, &config.health);
            match jmxgate::open_files::shortfall(limit, needed) {
                Some(warning) => tracing::warn!("{warning}"),
                None => tracing::debug!(limit, needed, "open-files limit"),
            }
        }
        Err(e) => tracing::warn!("cannot read or raise the open-files limit: {e}"),
    }
}

/// A loaded config with where it came from.
struct Loaded(Config, ConfigSource);

fn config_path_display(l: &Loaded) -> String {
    l.1.describe()
}

/// Everything `serve` would load, without starting anything: the audit
/// writer is not started (it would begin a new file), only its directory
/// checked.
fn check(source: &ConfigSource) -> Result<(Loaded, ()), String> {
    let config = source.load().map_err(|e| e.to_string())?;

    // Every problem of every part, in the layout of the configuration's
    // own problems.
    let all = |problems: Vec<String>| {
        jmxgate::config::ConfigError {
            file: std::path::PathBuf::from(source.describe()),
            problems,
        }
        .to_string()
    };
    let mut problems = jmxgate::app::file_problems(&config);
    let mut without_audit = config.clone();
    if let Some(audit) = without_audit.audit.take() {
        if let Err(e) = std::fs::create_dir_all(&audit.dir).and_then(|()| tempfile_in(&audit.dir)) {
            problems.push(format!("audit.dir {}: {e}", audit.dir.display()));
        }
        if let Err(e) = jmxgate::audit::ship::check(&audit.sinks, &audit.dir) {
            problems.push(e);
        }
    }
    if !problems.is_empty() {
        return Err(all(problems));
    }
    // The rest of what `serve` builds.
    Gateway::new(&without_audit).map_err(|e| all(vec![e]))?;
    Ok((Loaded(config, source.clone()), ()))
}

/// Creates and removes a file, proving the directory is writable.
fn tempfile_in(dir: &std::path::Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".jmxgate-check-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(probe)
}

/// The gateway from a loaded configuration; called inside the runtime.
fn build(mut config: Config, source: ConfigSource) -> Result<(Loaded, Arc<Gateway>), String> {
    let gateway = Gateway::new(&config).map_err(|e| format!("{}: {e}", source.describe()))?;
    // The gateway holds its own copy; serving needs only the listeners.
    config.targets = Vec::new();
    config.inventory_targets = Vec::new();
    jmxgate::memory::release_freed();
    Ok((Loaded(config, source), Arc::new(gateway)))
}

async fn serve(loaded: Loaded, gateway: Arc<Gateway>) -> Result<(), String> {
    let Loaded(config, source) = loaded;
    let stop_signal = shutdown_signal();
    tokio::spawn(jmxgate::reload::watch(
        gateway.clone(),
        source,
        std::time::Duration::from_secs(2),
    ));
    // Members first: no duty starts before this replica knows its share.
    let membership = jmxgate::app::join_cluster(&gateway, &config).await?;
    let _ownership = jmxgate::jobs::ownership::spawn(&gateway);
    // Subscribed first: every event the probes record is told.
    let _event_webhooks = jmxgate::jobs::webhooks::spawn_event_webhooks(&gateway);
    let _probes = jmxgate::jobs::probes::spawn(&gateway);
    let _health_view = jmxgate::jobs::health_view::spawn(&gateway);
    let _discovery = gateway.spawn_discovery();
    let _access_store = jmxgate::doors::access::spawn_access_store(&gateway);
    let _otlp = jmxgate::jobs::otlp::spawn_otlp_exports(&gateway);
    // One shutdown signal for every listener; each drains its requests.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut sockets = pipeline::listen::Sockets {
        http: None,
        https: None,
    };
    if let Some(addr) = config.server.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(
            targets = gateway.fleet().len(),
            "jmxgate {} listening on http://{local}/jolokia",
            jmxgate::version::GATEWAY_VERSION
        );
        sockets.http = Some(listener.into_std().map_err(|e| e.to_string())?);
    }
    if let Some(tls) = &config.server.tls {
        let reloading = Arc::new(
            jmxgate::tls::ReloadingTls::new(tls.clone()).map_err(|e| format!("server.tls: {e}"))?,
        );
        let listener = tokio::net::TcpListener::bind(tls.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", tls.listen))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(
            targets = gateway.fleet().len(),
            "jmxgate {} listening on https://{local}/jolokia",
            jmxgate::version::GATEWAY_VERSION
        );
        tokio::spawn(reloading.clone().watch());
        sockets.https = Some((listener.into_std().map_err(|e| e.to_string())?, reloading));
    }
    let mut admin_server = None;
    if let Some(admin) = &config.admin {
        let listener = tokio::net::TcpListener::bind(admin.listen)
            .await
            .map_err(|e| format!("cannot listen on {} (admin): {e}", admin.listen))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!("admin listening on http://{local}/ (metrics, healthz, readyz)");
        let mut stop = stop_rx.clone();
        admin_server = Some(tokio::spawn(jmxgate::admin::serve(
            listener,
            jmxgate::admin::router(gateway.clone(), admin),
            async move {
                let _ = stop.wait_for(|stop| *stop).await;
            },
        )));
    }
    let workers = config.server.workers();
    let workers = pipeline::listen::Workers::start(workers, &sockets, &gateway, &stop_rx)
        .map_err(|e| format!("cannot start the serving workers: {e}"))?;
    drop(sockets);
    tokio::spawn(async move {
        stop_signal.await;
        let _ = stop_tx.send(true);
    });
    let mut result = tokio::task::spawn_blocking(move || workers.join())
        .await
        .map_err(|e| format!("server task failed: {e}"))
        .and_then(|r| r.map_err(|e| format!("server failed: {e}")));
    if let Some(admin) = admin_server {
        if let Err(e) = admin
            .await
            .map_err(|e| format!("admin task failed: {e}"))
            .and_then(|r| r.map_err(|e| format!("admin server failed: {e}")))
        {
            result = Err(e);
        }
    }
    // Its share goes to the others at their next read, not after a lease.
    if let Some(membership) = membership {
        membership.leave().await;
    }
    // Every request has been answered: seal the audit file.
    if let Some(audit) = gateway.audit() {
        if let Err(e) = audit.close().await {
            tracing::error!("closing the audit log: {e}");
        }
    }
    result
}

/// SIGTERM or Ctrl-C. The handlers are installed when this is called (not
/// when it is first awaited), before the gateway says it listens: a stop
/// right after start is a clean one too.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let (term, int) = signals;
            tokio::select! {
                () = received(term) => {},
                () = received(int) => {},
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down: finishing in-flight requests");
    }
}

/// The first arrival of a signal whose handler is installed; never, when
/// none could be.
#[cfg(unix)]
async fn received(signal: Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(mut s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Files as given, directories replaced by their audit files, in chain order.
fn audit_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    jmxgate::audit::chain::order_files(&audit_paths(paths)?)
}

/// Files as given, directories replaced by their audit files.
fn audit_paths(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            files.extend(jmxgate::audit::chain::files_in(p)?);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// `audit keygen`: a new signing key and its public key.
fn audit_keygen(out: &std::path::Path) -> ExitCode {
    match jmxgate::audit::checkpoint::keygen(out) {
        Ok(id) => {
            println!("key id: {id}");
            println!(
                "private key: {} (set audit.signing_key_file to it)",
                out.display()
            );
            println!(
                "public key: {} (for `jmxgate audit verify --public-key`)",
                jmxgate::audit::checkpoint::public_key_path(out).display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jmxgate: {e}");
            ExitCode::from(2)
        }
    }
}

fn audit_verify(paths: &[PathBuf], public_keys: &[PathBuf]) -> ExitCode {
    use jmxgate::audit::{chain, checkpoint::Keyring};
    let keys = match Keyring::load(public_keys) {
        Ok(k) => (!public_keys.is_empty()).then_some(k),
        Err(e) => {
            eprintln!("jmxgate: {e}");
            return ExitCode::from(2);
        }
    };
    let chains = match audit_paths(paths).and_then(|f| chain::chains(&f)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("jmxgate: {e}");
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    for chain in &chains {
        let report = match chain::verify_with(&chain.files, keys.as_ref()) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("jmxgate: {e}");
                return ExitCode::from(2);
            }
        };
        // A log continued under a new replica id: `replica a, then b`.
        let named: Vec<&str> = chain
            .replicas
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        let who = if named.is_empty() {
            String::new()
        } else {
            format!(" replica {}", named.join(", then "))
        };
        failed |= print_verified(&who, &report, keys.is_some());
    }
    if keys.is_none() {
        println!("note: checkpoint signatures were not checked; give --public-key to check them");
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints one replica's report; true when it fails.
fn print_verified(who: &str, report: &jmxgate::audit::chain::Report, keys: bool) -> bool {
    use jmxgate::audit::chain::Problem;
    if let Some(seq) = report.anchored_at {
        println!("note{who}: the files start at seq {seq}; the chain is checked from there on");
    }
    for f in &report.findings {
        let level = match f.problem {
            Problem::TornTail => "warning",
            Problem::UnknownKey(_) => "error",
            _ => "TAMPERED",
        };
        println!("{level}{who}: {f}");
    }
    let range = match (report.first_seq, report.last_seq) {
        (Some(a), Some(b)) => format!(", seq {a}..={b}"),
        _ => String::new(),
    };
    let counted = format!(
        "{} records in {} file(s){range}",
        report.records, report.files
    );
    if report.tampered() {
        let what = if report
            .findings
            .iter()
            .all(|f| matches!(f.problem, Problem::UnknownKey(_) | Problem::TornTail))
        {
            "a checkpoint's key is not known"
        } else {
            "the chain is broken"
        };
        println!("FAILED{who}: {counted}: {what}");
        return true;
    }
    if !keys {
        println!("OK{who}: {counted}, chain intact");
        return false;
    }
    let Some(proof) = &report.proven else {
        println!(
            "FAILED{who}: {counted}, chain intact, but no checkpoint: nothing in it is proven \
             (was audit.signing_key_file set when they were written?)"
        );
        return true;
    };
    let unproven = match report.unproven() {
        0 => String::new(),
        1 => "; 1 record after the last checkpoint is not yet proven".into(),
        n => format!("; {n} records after the last checkpoint are not yet proven"),
    };
    // A checkpoint from before times were signed proves its chain only.
    let time = if proof.time_signed {
        proof.time.clone()
    } else {
        format!("{}, a time not covered by its signature", proof.time)
    };
    println!(
        "OK{who}: {counted}, chain intact; proven by checkpoints up to seq {} ({time}, key {}){unproven}",
        proof.seq, proof.key_id
    );
    false
}

fn audit_query(
    paths: &[PathBuf],
    filter: &jmxgate::audit::query::Filter,
    format: QueryFormat,
) -> ExitCode {
    use jmxgate::audit::query;
    let entries = match audit_files(paths).and_then(|f| query::read(&f)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("jmxgate: {e}");
            return ExitCode::from(2);
        }
    };
    let matching: Vec<_> = entries.iter().filter(|e| filter.matches(e)).collect();
    match format {
        QueryFormat::Json => {
            for e in &matching {
                println!("{}", serde_json::to_string(e).expect("records serialise"));
            }
        }
        QueryFormat::Table => println!("{}", query::table(&matching)),
    }
    ExitCode::SUCCESS
}

fn hash_password(bcrypt: bool) -> ExitCode {
    use std::io::{BufRead, IsTerminal};
    if std::io::stdin().is_terminal() {
        eprint!("password (input is shown): ");
    }
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        eprintln!("jmxgate: cannot read the password from standard input");
        return ExitCode::from(2);
    }
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        eprintln!("jmxgate: empty password; type it on standard input");
        return ExitCode::from(2);
    }
    use jmxgate::pipeline::authenticate::basic;
    let hashed = if bcrypt {
        basic::hash_password_bcrypt(password)
    } else {
        basic::hash_password(password)
    };
    match hashed {
        Ok(h) => {
            println!("{h}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jmxgate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn policy_check(
    policy: &std::path::Path,
    request: &str,
    remote: &[String],
    method: &str,
    origin: Option<&str>,
) -> ExitCode {
    use jmxgate::pipeline::authorize::{check_policy, RequestFacts};
    let policy = match jmxgate::policy::Policy::load(policy) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            eprintln!("jmxgate: policy {e}");
            return ExitCode::from(2);
        }
    };
    let value: serde_json::Value = match serde_json::from_str(request) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("jmxgate: --request is not JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let request = match jmxgate::protocol::Request::from_json(&value, &Default::default()) {
        Ok((r, _)) => r,
        Err(e) => {
            eprintln!("jmxgate: --request: {}", e.message);
            return ExitCode::from(2);
        }
    };
    let method = method.to_ascii_uppercase();
    let facts = RequestFacts {
        method: &method,
        chain: remote,
        origin,
        scheme: "http",
        denied_reads_in_place: false,
    };
    match check_policy(policy, &facts, &request) {
        Ok(allowed) => {
            println!("allow");
            println!("rule: {}", allowed.rule);
            if allowed.plan != jmxgate::pipeline::authorize::Plan::Forward {
                println!("then: {}", allowed.plan.name());
            }
            ExitCode::SUCCESS
        }
        Err(denied) => {
            println!("deny");
            println!("rule: {}", denied.rule);
            println!("error: {}", denied.error.message);
            ExitCode::from(1)
        }
    }
}

/// Logs on stderr: the CLI flag beats `[log]`; `RUST_LOG` beats the
/// configured filter; `quiet` keeps errors only.
fn init_logging(flag: Option<LogFormat>, config: &Config) {
    use jmxgate::config::LogFormat as Configured;
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let format = flag.unwrap_or(match config.log.format {
        Configured::Text => LogFormat::Text,
        Configured::Json => LogFormat::Json,
        Configured::Quiet => LogFormat::Quiet,
    });
    let filter = match format {
        LogFormat::Quiet => EnvFilter::new("error"),
        _ => EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(config.log_filter())),
    }
    // The MCP SDK logs each request at INFO and tool arguments and
    // results at DEBUG: values never go to the log, whatever the filter.
    .add_directive(
        jmxgate::doors::mcp::SDK_LOG_CEILING
            .parse()
            .expect("a valid directive"),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text | LogFormat::Quiet => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
