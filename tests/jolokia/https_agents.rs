//! Agents over HTTPS: verified against the configured CA, never silently
//! insecure.

use crate::common;

use common::{Agent, Gateway, TestPki};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn https_agents_are_verified_against_the_configured_ca() {
    let pki = TestPki::new("agents");
    let other = TestPki::new("someone-else");
    let agent = Agent::start_https("secure", &pki, "secure", false, &[]);
    let url = format!("https://127.0.0.1:{}/jolokia", agent.port);
    let config = format!(
        "[[targets]]\nname = \"trusted\"\nurl = \"{url}\"\nca_file = \"{}\"\n\n\
         [[targets]]\nname = \"by-name\"\nurl = \"https://localhost:{}/jolokia\"\nca_file = \"{}\"\n\n\
         [[targets]]\nname = \"wrong-ca\"\nurl = \"{url}/\"\nca_file = \"{}\"\n\n\
         [[targets]]\nname = \"system-roots\"\nurl = \"{url}//\"\n",
        pki.ca_file().display(),
        agent.port,
        pki.ca_file().display(),
        other.ca_file().display(),
    );
    let gw = Gateway::start(&config).await;
    let read = |t: &str| json!({"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":t}});
    let (_, r) = gw
        .post(
            "/jolokia",
            &json!([
                read("trusted"),
                read("by-name"),
                read("wrong-ca"),
                read("system-roots")
            ]),
        )
        .await;
    assert_eq!(r[0]["value"], "secure", "{}", r[0]);
    assert_eq!(r[1]["value"], "secure", "{}", r[1]);
    for i in [2, 3] {
        assert_eq!(r[i]["status"], 502, "{}", r[i]);
        let e = r[i]["error"].as_str().unwrap();
        assert!(
            e.to_lowercase().contains("certificate"),
            "the error names the cause: {e}"
        );
    }
    // Proxy mode finds the HTTPS agent by its connector URL (port not
    // ending in 443, so the explicit +https form).
    let (_, r) = gw
        .post(
            "/jolokia",
            &read(&format!(
                "service:jmx:jolokia+https://127.0.0.1:{}/jolokia",
                agent.port
            )),
        )
        .await;
    assert_eq!(r["value"], "secure", "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_ca_file_fails_start_up_with_its_name() {
    let config = "[server]\nlisten = \"127.0.0.1:0\"\n[[targets]]\nname = \"x\"\nurl = \"https://127.0.0.1:1/jolokia\"\nca_file = \"/no/such/ca.pem\"\n";
    let config = jmxgate::Config::parse(config).unwrap().validate().unwrap();
    let err = jmxgate::Gateway::new(&config)
        .err()
        .expect("start-up must fail");
    assert!(
        err.contains("/no/such/ca.pem") && err.contains("\"x\""),
        "{err}"
    );
}
