//! A real Kubernetes API server (kube-apiserver 1.20.2 over Debian's
//! etcd) for tests, started by ../shared/kubernetes/run-apiserver.sh on
//! free ports; both processes are killed on drop. No kubelet runs, so a
//! test makes a Pod "run" by writing its status (phase, IP, Ready), as a
//! kubelet would. Included with `#[path]` by the suites that need it.

// Each suite uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

pub struct ApiServer {
    dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    etcd_pid: u32,
    apiserver_pid: Option<u32>,
    /// The API server's command line, to start it again after `stop`.
    apiserver_argv: Vec<String>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/kubernetes/run-apiserver.sh")
}

/// True when the shared API server and etcd are there.
pub fn available() -> bool {
    script().exists()
        && Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// A free port whose next one is free too (etcd's peer port).
fn free_pair() -> u16 {
    for _ in 0..100 {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = a.local_addr().unwrap().port();
        if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
    panic!("no two free ports in a row");
}

/// Kills a process at once (SIGKILL: kube-apiserver's graceful shutdown
/// waits for open watches) and waits until it is gone.
fn kill(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    // At most 30 s, then it is left as it is: this runs on drop too,
    // where a panic would not help.
    let _ = crate::common::try_eventually_blocking(Duration::from_secs(30), || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        // A zombie of ours would stay; these are the script's, reaped by init.
        let gone = !Path::new(&format!("/proc/{pid}")).exists()
            || stat
                .as_deref()
                .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"));
        if gone {
            Ok(())
        } else {
            Err(format!("process {pid} still there"))
        }
    });
}

impl ApiServer {
    /// Starts etcd and the API server; panics (with the log's tail) when
    /// it isn't ready within the script's 120 s.
    pub fn start() -> ApiServer {
        let dir = tempfile::tempdir().unwrap();
        let port = free_pair();
        let etcd_port = loop {
            let p = free_pair();
            if p != port && p + 1 != port && p != port + 1 {
                break p;
            }
        };
        let out = Command::new("bash")
            .arg(script())
            .arg(dir.path())
            .env("APISERVER_PORT", port.to_string())
            .env("ETCD_PORT", etcd_port.to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run run-apiserver.sh");
        let pids: Vec<u32> = std::fs::read_to_string(dir.path().join("pids"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if !out.status.success() || pids.len() != 2 {
            for pid in &pids {
                kill(*pid);
            }
            panic!(
                "kube-apiserver did not start: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let apiserver_argv: Vec<String> = std::fs::read(format!("/proc/{}/cmdline", pids[1]))
            .unwrap_or_default()
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        ApiServer {
            kubeconfig: dir.path().join("kubeconfig"),
            dir,

            etcd_pid: pids[0],
            apiserver_pid: Some(pids[1]),
            apiserver_argv,
        }
    }

    /// Stops the API server (etcd, and so the cluster's state, stay).
    pub fn stop(&mut self) {
        if let Some(pid) = self.apiserver_pid.take() {
            kill(pid);
        }
    }

    /// Starts the API server again after `stop`, on the same port with the
    /// same certificates and tokens; waits until it is ready.
    pub async fn restart(&mut self) {
        assert!(self.apiserver_pid.is_none(), "running");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("apiserver.log"))
            .unwrap();
        let child = Command::new(&self.apiserver_argv[0])
            .args(&self.apiserver_argv[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start kube-apiserver again");
        self.apiserver_pid = Some(child.id());
        // Reaped by a thread, so no zombie is left behind.
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
        });
        let this = &*self;
        crate::common::eventually(
            "kube-apiserver ready again",
            Duration::from_secs(120),
            || async {
                let client = this.client().await?;
                client
                    .apiserver_version()
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            },
        )
        .await;
    }

    /// An admin client (the kubeconfig's token).
    pub async fn client(&self) -> Result<kube::Client, String> {
        let file =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).map_err(|e| e.to_string())?;
        let config =
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| e.to_string())?;
        kube::Client::try_from(config).map_err(|e| e.to_string())
    }

    /// The tail of the API server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
        kill(self.etcd_pid);
    }
}

/// Creates namespace `name` with `labels`.
pub async fn create_namespace(client: &kube::Client, name: &str, labels: Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// Creates a Pod from its `metadata` (name, labels, annotations…) and the
/// container ports `[{"name": "jolokia", "containerPort": 8778}]`.
pub async fn create_pod(client: &kube::Client, ns: &str, metadata: Value, ports: Value) {
    let mut pod = json!({
        "metadata": metadata,
        "spec": {"containers": [{"name": "app", "image": "jvm:test", "ports": ports}]}
    });
    pod["metadata"]["namespace"] = json!(ns);
    let pod: Pod = serde_json::from_value(pod).unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {ns}/{:?}: {e}", pod.metadata.name));
}

/// Writes a Pod's status as a kubelet would: Running at `ip`, Ready or not.
pub async fn set_running(client: &kube::Client, ns: &str, name: &str, ip: &str, ready: bool) {
    let status = json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
    }});
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("patch status of {ns}/{name}: {e}"));
}

/// Deletes a Pod at once (no kubelet would confirm a graceful delete).
pub async fn delete_pod(client: &kube::Client, ns: &str, name: &str) {
    Api::<Pod>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap_or_else(|e| panic!("delete pod {ns}/{name}: {e}"));
}

/// A Role allowing `verbs` on pods in `ns`, bound to service account
/// `account` (`namespace/name`).
pub async fn allow_on_pods(client: &kube::Client, ns: &str, account: (&str, &str), verbs: &[&str]) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let pp = PostParams::default();
    let name = format!("{}-{}", account.0, account.1);
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&pp, &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account.1, "namespace": account.0}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&pp, &binding)
        .await
        .unwrap();
}

/// Lets service account `sa` of namespace `home` get, list and watch
/// Pods in `ns`, as Kubernetes discovery needs.
pub async fn grant_pod_reading(client: &kube::Client, ns: &str, home: &str, sa: &str) {
    allow_on_pods(client, ns, (home, sa), &["get", "list", "watch"]).await;
}

impl ApiServer {
    /// A kubeconfig for service account `sa` of namespace `home`, allowed
    /// to get, list and watch Pods in `namespaces` only (a Role and
    /// RoleBinding in each), with a token from the TokenRequest API.
    pub async fn service_account_kubeconfig(
        &self,
        client: &kube::Client,
        home: &str,
        sa: &str,
        namespaces: &[&str],
    ) -> PathBuf {
        use k8s_openapi::api::core::v1::ServiceAccount;
        let pp = PostParams::default();
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), home);
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap();
        accounts.create(&pp, &account).await.unwrap();
        for ns in namespaces {
            grant_pod_reading(client, ns, home, sa).await;
        }
        self.token_kubeconfig(client, home, sa).await
    }

    /// A kubeconfig that acts as the existing service account `sa` of
    /// namespace `home`, with a token from the TokenRequest API.
    pub async fn token_kubeconfig(&self, client: &kube::Client, home: &str, sa: &str) -> PathBuf {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::ServiceAccount;
        let pp = PostParams::default();
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), home);
        let request: TokenRequest = serde_json::from_value(json!({
            "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}
        }))
        .unwrap();
        let token = accounts
            .create_token_request(sa, &pp, &request)
            .await
            .unwrap()
            .status
            .expect("a token")
            .token;
        let admin = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let users_line = admin
            .lines()
            .find(|l| l.starts_with("users:"))
            .expect("users line")
            .to_string();
        let text = admin.replace(
            &users_line,
            &format!("users: [{{name: admin, user: {{token: \"{token}\"}}}}]"),
        );
        let path = self.dir.path().join(format!("kubeconfig-{sa}"));
        std::fs::write(&path, text).unwrap();
        path
    }
}
