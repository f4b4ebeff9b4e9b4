//! One caller of a gateway's access-requests API and Jolokia door, and the
//! items the just-in-time tests send; shared by `tests/access/access_requests.rs`
//! (in-process gateway) and `tests/access/access_replicas.rs` (real processes).

// Each suite uses part of it.
#![allow(dead_code)]

use serde_json::{json, Value};

use crate::common::Agent;

pub const REQUESTS: &str = "/jmxgate/access/requests";
pub const LOGGING: &str = "java.util.logging:type=Logging";

/// One caller (Basic, password `pw`) at one door (a gateway or a proxy).
pub struct As<'a> {
    pub http: &'a reqwest::Client,
    pub base: String,
    pub user: &'a str,
}

impl As<'_> {
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .basic_auth(self.user, Some("pw"));
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// A Jolokia item through the Jolokia door (always HTTP 200).
    pub async fn jolokia(&self, item: &Value) -> Value {
        let (status, v) = self.post("/jolokia", item).await;
        assert_eq!(status, 200, "{} as {}: {v}", self.base, self.user);
        v
    }

    pub async fn ask(&self, body: &Value) -> (u16, Value) {
        self.post(REQUESTS, body).await
    }

    pub async fn review(&self, id: &str, verdict: &str, comment: &str) -> (u16, Value) {
        self.post(
            &format!("{REQUESTS}/{id}/{verdict}"),
            &json!({ "comment": comment }),
        )
        .await
    }

    /// Waits (generously: the sweep runs each second on a busy machine)
    /// until request `id` reads `state`.
    #[allow(dead_code)]
    pub async fn wait_for_state(&self, id: &str, state: &str) {
        crate::common::eventually(
            &format!("request {id} is {state}"),
            std::time::Duration::from_secs(60),
            || async {
                let (_, r) = self.get(&format!("{REQUESTS}/{id}")).await;
                if r["state"] == state {
                    Ok(())
                } else {
                    Err(r.to_string())
                }
            },
        )
        .await;
    }
}

/// The access request an `ApprovalRequired` answer names.
pub fn request_named_by(answer: &Value) -> String {
    assert_eq!(answer["error_type"], "jmxgate.ApprovalRequired", "{answer}");
    let message = answer["error"].as_str().unwrap();
    message
        .split_whitespace()
        .find(|w| w.starts_with("ar-"))
        .unwrap_or_else(|| panic!("{message}"))
        .trim_end_matches([';', ',', '.', ')'])
        .to_string()
}

pub fn gc_on(target: &str) -> Value {
    json!({"type":"exec","mbean":"java.lang:type=Memory","operation":"gc","target":{"url":target}})
}

pub fn set_level(target: &str, level: &str) -> Value {
    json!({"type":"exec","mbean":LOGGING,"operation":"setLoggerLevel",
           "arguments":["global", level],"target":{"url":target}})
}

/// The level the agent's JVM has for the `global` logger, from the agent.
pub async fn level_on(agent: &Agent) -> Value {
    crate::common::direct(
        agent,
        &json!({"type":"exec","mbean":LOGGING,"operation":"getLoggerLevel","arguments":["global"]}),
    )
    .await["value"]
        .clone()
}
