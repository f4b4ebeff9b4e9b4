//! The MCP door's prompts and completions through the official Python SDK
//! (`mcp` from PyPI), in front of real Jolokia agents: the prompts' tool
//! calls run and answer with the agents' own values, and completions offer
//! target names, MBean names and attributes as the caller may see them (a
//! narrow role sees one of the two targets and not one attribute), also
//! through `jmxgate mcp`, the stdio bridge. The
//! suite is tests/clients/python/test_mcp_prompts.py; this file starts the
//! agents and the gateway, then checks the audit records its calls left.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Agent, Gateway};
use serde_json::Value;

/// May do everything everywhere.
const OPERATOR: (&str, &str) = ("operator", "op:erat0r pass");
/// Reaches target A only, and may not read Types' `Special` there.
const NARROW: (&str, &str) = ("narrow", "narrow pass");

const NARROW_POLICY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<restrict>
  <commands>
    <command>read</command>
    <command>list</command>
    <command>search</command>
    <command>version</command>
  </commands>
  <deny>
    <mbean>
      <name>jmxgate.test:type=Types</name>
      <attribute>Special</attribute>
    </mbean>
  </deny>
</restrict>
"#;

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python")
}

#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_prompts_and_completions() {
    let python = python_dir().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing (the venv with mcp==2.3.0); run scripts/install-deps.sh",
        python.display()
    );
    let handles: Vec<_> = ["mcp-prompts-a", "mcp-prompts-b"]
        .into_iter()
        .map(|n| std::thread::spawn(move || Agent::start(n)))
        .collect();
    let mut agents = handles.into_iter().map(|h| h.join().unwrap());
    let (a, b) = (agents.next().unwrap(), agents.next().unwrap());

    let dir = tempfile::tempdir().unwrap();
    let users = common::users_file(
        dir.path(),
        &[
            (OPERATOR.0, OPERATOR.1, &["operator"]),
            (NARROW.0, NARROW.1, &["narrow"]),
        ],
    );
    let narrow_policy = dir.path().join("narrow.xml");
    std::fs::write(&narrow_policy, NARROW_POLICY).unwrap();
    let audit = dir.path().join("audit");
    let config = format!(
        "auth = [\"basic\"]\n\n\
         [[targets]]\nname = \"{a}\"\nurl = \"{a_url}\"\nlabels = {{ suite = \"prompts\", side = \"a\" }}\n\n\
         [[targets]]\nname = \"{b}\"\nurl = \"{b_url}\"\nlabels = {{ suite = \"prompts\", side = \"b\" }}\n\n\
         [auth.basic]\nusers_file = \"{users}\"\n\n\
         [[roles]]\nname = \"operator\"\ntargets = [\"*\"]\n\n\
         [[roles]]\nname = \"narrow\"\ntargets = [\"{a}\"]\npolicy = \"{narrow}\"\n\n\
         [audit]\ndir = \"{audit}\"\n",
        a = a.name,
        b = b.name,
        a_url = a.url(),
        b_url = b.url(),
        users = users.display(),
        narrow = narrow_policy.display(),
        audit = audit.display(),
    );
    let gateway = Gateway::start(&config).await;

    let mut cmd = Command::new(python);
    cmd.current_dir(python_dir())
        .args(["-m", "unittest", "-v", "test_mcp_prompts"])
        .envs([
            ("JMXGATE_URL", gateway.url("")),
            ("JMXGATE_BIN", env!("CARGO_BIN_EXE_jmxgate").to_string()),
            ("JMXGATE_USER", OPERATOR.0.to_string()),
            ("JMXGATE_PASSWORD", OPERATOR.1.to_string()),
            ("JMXGATE_NARROW_USER", NARROW.0.to_string()),
            ("JMXGATE_NARROW_PASSWORD", NARROW.1.to_string()),
            ("JMXGATE_TARGET_A", a.name.clone()),
            ("JMXGATE_TARGET_B", b.name.clone()),
            ("JMXGATE_AGENT_A_URL", a.url()),
            ("JMXGATE_AGENT_B_URL", b.url()),
        ]);
    let (out, err) = common::run_client(cmd, Duration::from_secs(240)).await;
    // What ran, for --success-output.
    println!("{out}{err}");

    // A completion's reads are the caller's own, audited as `completion`:
    // the narrow caller's list of Types on A, never anything on B.
    let records = common::audit_records(&audit);
    let completion = |r: &&Value| r["channel"] == "mcp" && r["tool"] == "completion";
    assert!(
        records
            .iter()
            .filter(completion)
            .any(|r| r["principal"] == NARROW.0
                && r["type"] == "list"
                && r["target"] == a.name.as_str()
                && r["decision"] == "allowed"),
        "no audited completion list by {}: {records:#?}",
        NARROW.0
    );
    assert!(
        records
            .iter()
            .filter(completion)
            .any(|r| r["principal"] == OPERATOR.0
                && r["type"] == "search"
                && r["target"] == a.name.as_str()),
        "no audited completion search: {records:#?}"
    );
    assert!(
        !records
            .iter()
            .any(|r| r["principal"] == NARROW.0 && r["target"] == b.name.as_str()),
        "the narrow caller reached {}: {records:#?}",
        b.name
    );
    let verify = Command::new(env!("CARGO_BIN_EXE_jmxgate"))
        .args(["audit", "verify"])
        .arg(&audit)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "audit verify: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
}
