//! The console's refusals keep its security headers: a 401 forbids
//! framing as every page does.
//!
//! Found by issue 55's hardening round 4 (formerly tests/hardening_round4.rs).

use crate::common;
use crate::four_eyes::{four_eyes_config, started};

use common::Agent;

/// Item 14: the console's 401 (a page asked for without credentials) is
/// framed no more than the page it stands for.
#[tokio::test(flavor = "multi_thread")]
async fn the_consoles_401_keeps_its_frame_headers() {
    let orders = Agent::start("r4-console-401");
    let dir = tempfile::tempdir().unwrap();
    let gw = started(&four_eyes_config(dir.path(), &orders)).await;
    for path in ["/console/", "/console/audit", "/console/targets/orders-1"] {
        let r = gw.http.get(gw.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let h = r.headers();
        assert_eq!(h.get("x-frame-options").unwrap(), "DENY", "{path}");
        let csp = h.get("content-security-policy").unwrap().to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(h.get("www-authenticate").is_some(), "{path}");
    }
}
