//! Counting stand-in agents: one small HTTP server of our own that
//! answers Jolokia `version` requests as a 1.7.1 agent would and counts
//! every request per target. Many targets share it, each at its own path
//! (`http://127.0.0.1:PORT/<name>/jolokia`), so a test can tell how often
//! each target was probed, and by how many replicas at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

pub struct CountingAgents {
    pub port: u16,
    counts: Arc<Mutex<HashMap<String, u64>>>,
    /// Targets that answer 503 for now (still counted).
    down: Arc<Mutex<std::collections::HashSet<String>>>,
    _server: tokio::task::JoinHandle<()>,
}

impl CountingAgents {
    pub async fn start() -> CountingAgents {
        let counts: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = counts.clone();
        let down: Arc<Mutex<std::collections::HashSet<String>>> = Arc::default();
        let refusing = down.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, body: axum::body::Bytes| {
                let seen = seen.clone();
                let refusing = refusing.clone();
                async move {
                    let name = uri.path().trim_start_matches('/').split('/').next().unwrap_or("").to_string();
                    *seen.lock().unwrap().entry(name.clone()).or_default() += 1;
                    if refusing.lock().unwrap().contains(&name) {
                        return (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            [(axum::http::header::CONTENT_TYPE, "text/plain")],
                            "down for the test".to_string(),
                        );
                    }
                    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let items = match asked {
                        Value::Array(items) => items,
                        one => vec![one],
                    };
                    let answers: Vec<Value> = items
                        .into_iter()
                        .map(|request| {
                            json!({
                                "request": request,
                                "value": {"agent": "1.7.1", "protocol": "7.2", "config": {}, "info": {}},
                                "timestamp": 1,
                                "status": 200,
                            })
                        })
                        .collect();
                    (
                        axum::http::StatusCode::OK,
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        Value::Array(answers).to_string(),
                    )
                }
            },
        );
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        CountingAgents {
            port,
            counts,
            down,
            _server: server,
        }
    }

    /// `[[targets]]` for `names`, each at its own path here.
    pub fn targets_toml(&self, names: &[String]) -> String {
        names
            .iter()
            .map(|n| {
                format!(
                    "[[targets]]\nname = \"{n}\"\nurl = \"http://127.0.0.1:{}/{n}/jolokia\"\n",
                    self.port
                )
            })
            .collect()
    }

    /// Makes `name` answer 503 (`down`) or as an agent again.
    pub fn set_down(&self, name: &str, down: bool) {
        let mut set = self.down.lock().unwrap();
        if down {
            set.insert(name.to_string());
        } else {
            set.remove(name);
        }
    }

    /// Requests each target got so far.
    pub fn counts(&self) -> HashMap<String, u64> {
        self.counts.lock().unwrap().clone()
    }
}
