//! A host application that serves jmxgate inside its own axum app, under
//! `/monitoring/jolokia`, next to its own routes.
//!
//! ```sh
//! AGENT_URL=http://127.0.0.1:8778/jolokia LISTEN=127.0.0.1:3000 cargo run --example embedded
//! curl http://127.0.0.1:3000/monitoring/jolokia/version
//! curl http://127.0.0.1:3000/monitoring/jolokia/targets/app/read/java.lang:type=Runtime/Uptime
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::get;
use axum::Router;

/// Where the Jolokia endpoint lives in the host's URL space.
pub const MOUNT: &str = "/monitoring/jolokia";

/// The gateway's configuration: one agent, named `app`.
pub fn config(agent_url: &str, listen: &str) -> Result<jmxgate::Config, Vec<String>> {
    // toml quotes the values, so any URL makes valid TOML.
    let text = format!(
        r#"
[server]
# Required by validate(); the host binds the socket, not the gateway.
listen = {listen}

[[targets]]
name = "app"
url = {agent_url}
"#,
        listen = toml::Value::from(listen),
        agent_url = toml::Value::from(agent_url),
    );
    jmxgate::Config::parse(&text)?.validate()
}

/// The host's router: its own routes, plus the gateway at [`MOUNT`].
pub fn app(config: &jmxgate::Config) -> Result<Router, String> {
    // The gateway matches the full request path against its prefix, so it
    // is mounted with `route_service` (which keeps the path) rather than
    // `nest` (which strips it). `into_service` because `route_service`
    // refuses a bare `Router`.
    let gateway = Arc::new(jmxgate::Gateway::new(config)?.with_prefix(MOUNT));
    let jolokia = jmxgate::pipeline::listen::router(gateway).into_service();
    Ok(Router::new()
        .route("/", get(|| async { "host app" }))
        .route("/health", get(|| async { "ok" }))
        .route_service(MOUNT, jolokia.clone())
        // `{*rest}` does not match an empty rest, hence `MOUNT/` apart.
        .route_service(&format!("{MOUNT}/"), jolokia.clone())
        .route_service(&format!("{MOUNT}/{{*rest}}"), jolokia))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The gateway logs through `tracing` (warnings, audit records).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let agent_url =
        std::env::var("AGENT_URL").unwrap_or_else(|_| "http://127.0.0.1:8778/jolokia".into());
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());

    let config = config(&agent_url, &listen).map_err(|problems| problems.join("\n"))?;
    let app = app(&config)?;

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    // The real address (LISTEN may ask for port 0); tests read this line.
    println!("listening on http://{}", listener.local_addr()?);
    // Connect info gives the gateway each client's address, for the audit
    // log and for policies' `<remote>` rules.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
