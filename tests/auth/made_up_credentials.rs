//! Basic authentication against hostile callers: a spray of made-up user
//! names leaves known users answered, and 401 and 429 answers are never
//! stored.
//!
//! No assertion is on speed: deadlines are generous, outcomes are checked.
//!
//! Found by issue 39's hardening round 3 (formerly tests/hardening_round3.rs).

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{basic_auth_config, header, shared_agents, targets_toml, users_file, Gateway};
use serde_json::Value;

const TYPES: &str = "jmxgate.test:type=Types";

/// A client that gives up on an answer only after a long time: a hang is
/// a failure, a slow answer on a loaded machine is not.
fn patient_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spray_of_made_up_user_names_leaves_known_users_answered() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let users = users_file(dir.path(), &[("known", "known-pw", &["ops"])]);
    // Fewer request slots than sprayers: before the fix every slot was
    // held by a sprayer waiting, without limit, for its password check.
    let config = basic_auth_config(
        &users,
        &format!(
            "max_concurrent_requests = 32\n{}[access]\n\n[[roles]]\nname = \"ops\"\ntargets = [\"*\"]\n",
            targets_toml(&[a])
        ),
    );
    let gw = Gateway::start(&config).await;
    let known = patient_client();
    let read = format!("/jolokia/targets/{}/read/{TYPES}/Name", a.name);
    // The known user's credentials are verified once, before the spray.
    let first = known
        .get(gw.url(&read))
        .basic_auth("known", Some("known-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let expected: Value = first.json().await.unwrap();
    assert_eq!(expected["status"], 200, "{expected}");

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sprayers: Vec<_> = (0..48)
        .map(|i| {
            let (stop, seen, url) = (stop.clone(), seen.clone(), gw.url("/jolokia/version"));
            tokio::spawn(async move {
                let http = patient_client();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let outcome = match http
                        .get(&url)
                        .basic_auth(format!("made-up-{i}-{n}"), Some("guess"))
                        .send()
                        .await
                    {
                        Ok(r) => {
                            let s = r.status().as_u16();
                            let no_store = header(&r, "cache-control") == Some("no-store");
                            let retry = header(&r, "retry-after").is_some();
                            match s {
                                401 if no_store => "401".to_string(),
                                429 if no_store && retry => "429".to_string(),
                                _ => format!("{s} cache-control={no_store} retry-after={retry}"),
                            }
                        }
                        Err(e) => format!("no answer: {e}"),
                    };
                    seen.lock().unwrap().push(outcome);
                }
            })
        })
        .collect();
    // The spray is under way before the known user asks again.
    common::eventually("the spray to be answered", Duration::from_secs(60), || {
        let seen = seen.clone();
        async move {
            let n = seen.lock().unwrap().len();
            if n >= 200 {
                Ok(())
            } else {
                Err(format!("{n} answers"))
            }
        }
    })
    .await;
    for attempt in 0..10 {
        let r = known
            .get(gw.url(&read))
            .basic_auth("known", Some("known-pw"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("attempt {attempt}: no answer for the known user: {e}"));
        assert_eq!(
            r.status(),
            200,
            "attempt {attempt}: the known user was refused"
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(
            body["value"], expected["value"],
            "attempt {attempt}: {body}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for s in sprayers {
        s.await.unwrap();
    }
    let seen = seen.lock().unwrap();
    let odd: Vec<&String> = seen.iter().filter(|o| *o != "401" && *o != "429").collect();
    assert!(
        odd.is_empty(),
        "sprayers get 401 or 429 (no-store, 429 with Retry-After): {odd:?}"
    );
    assert!(
        seen.iter().any(|o| o == "429"),
        "a full queue of password checks answers 429 at once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_of_credentials_are_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let [a, ..] = shared_agents();
    let users = users_file(dir.path(), &[("u", "u-pw", &[])]);
    // `[auth.basic]` comes last: one more of its keys.
    let config = basic_auth_config(&users, &targets_toml(&[a])) + "max_failures = 2\n";
    let gw = Gateway::start(&config).await;
    let url = gw.url("/jolokia/version");
    let none = gw.http.get(&url).send().await.unwrap();
    assert_eq!(none.status(), 401);
    assert_eq!(header(&none, "cache-control"), Some("no-store"));
    assert!(header(&none, "www-authenticate").is_some_and(|c| c.starts_with("Basic")));
    for _ in 0..2 {
        let wrong = gw
            .http
            .get(&url)
            .basic_auth("u", Some("no"))
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401);
        assert_eq!(header(&wrong, "cache-control"), Some("no-store"));
    }
    let throttled = gw
        .http
        .get(&url)
        .basic_auth("u", Some("no"))
        .send()
        .await
        .unwrap();
    assert_eq!(throttled.status(), 429);
    assert_eq!(header(&throttled, "cache-control"), Some("no-store"));
    assert!(header(&throttled, "retry-after").is_some());
}
