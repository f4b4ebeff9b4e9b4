//! The access store against a real PostgreSQL shared by two replicas
//! (two `Store`s, as two gateways would open it): what one records the
//! other sees, concurrent reviews count each once, and a store that is
//! down is an error, never a grant.

use crate::postgres;

use jmxgate::secret::Secret;
use jmxgate::store::{
    NewRequest, RequestKind, RequestState, Store, StoreConfig, StoreError, Verdict,
};

fn config(pg: &postgres::Postgres) -> StoreConfig {
    StoreConfig {
        url: Some(Secret::new(pg.url())),
        sqlite_file: None,
    }
}

fn request(id: &str, requester: &str, approvals: i64) -> NewRequest {
    NewRequest {
        id: id.into(),
        kind: RequestKind::Role,
        requester: requester.into(),
        requester_name: Some(requester.to_string()),
        role: "ops".into(),
        targets: Some("orders-*".into()),
        reason: Some("INC-1'); DELETE FROM access_reviews; --".into()),
        item: None,
        duration_ms: 60_000,
        approvals_needed: approvals,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_share_requests_reviews_and_grants() {
    let pg = postgres::Postgres::start();
    // Both migrate at once, as two replicas starting together do.
    let shared = config(&pg);
    let (a, b) = tokio::join!(Store::open(&shared), Store::open(&shared));
    let (a, b) = (a.unwrap(), b.unwrap());

    a.create_request(&request("r1", "dev", 2), 5).await.unwrap();
    let seen = b.request("r1").await.unwrap();
    assert_eq!(seen.state, RequestState::Pending);
    assert_eq!(
        seen.request.reason.as_deref(),
        Some("INC-1'); DELETE FROM access_reviews; --")
    );

    // Two approvers on two replicas at the same moment: both count, and
    // the request is approved (no write skew leaving it pending).
    let (x, y) = tokio::join!(
        a.review("r1", "lead-a", Verdict::Approve, None),
        b.review("r1", "lead-b", Verdict::Approve, Some("ok")),
    );
    x.unwrap();
    y.unwrap();
    let approved = a.request("r1").await.unwrap();
    assert_eq!(approved.state, RequestState::Approved, "{approved:?}");
    assert_eq!(approved.reviews.len(), 2);
    assert_eq!(b.grants("dev", 0).await.unwrap().len(), 1);

    // Revoked on one: gone on the other at once.
    b.revoke("r1", "lead-a").await.unwrap();
    assert!(a.grants("dev", 0).await.unwrap().is_empty());

    // The same reviewer on both replicas at once: counted once.
    a.create_request(&request("r2", "dev", 2), 5).await.unwrap();
    let (x, y) = tokio::join!(
        a.review("r2", "lead-a", Verdict::Approve, None),
        b.review("r2", "lead-a", Verdict::Approve, None),
    );
    let outcomes = [x.is_ok(), y.is_ok()];
    assert_eq!(outcomes.iter().filter(|ok| **ok).count(), 1, "{x:?} {y:?}");
    assert_eq!(a.request("r2").await.unwrap().state, RequestState::Pending);

    // The bound on pending requests holds across replicas racing.
    let racing: Vec<_> = (0..6)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                store
                    .create_request(&request(&format!("p{i}"), "racer", 1), 3)
                    .await
            })
        })
        .collect();
    let mut created = 0;
    for r in racing {
        match r.await.unwrap() {
            Ok(_) => created += 1,
            Err(StoreError::TooManyPending(3)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(created, 3);

    // An item approval is used once, whichever replica the use lands on.
    let item = NewRequest {
        kind: RequestKind::Item,
        item: Some("exec java.lang:type=Memory gc []".into()),
        ..request("i1", "dev", 1)
    };
    a.create_request(&item, 5).await.unwrap();
    b.review("i1", "lead-a", Verdict::Approve, None)
        .await
        .unwrap();
    let exact = item.item.as_deref().unwrap();
    let (x, y) = tokio::join!(
        a.use_item("i1", "dev", exact),
        b.use_item("i1", "dev", exact)
    );
    assert_eq!(
        [x.unwrap().is_some(), y.unwrap().is_some()]
            .iter()
            .filter(|u| **u)
            .count(),
        1
    );

    // The store's clock decides: the server's, the same for both.
    let (ta, tb) = (a.now_ms().await.unwrap(), b.now_ms().await.unwrap());
    assert!((ta - tb).abs() < 60_000, "{ta} {tb}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_that_is_down_is_an_error_that_names_no_password() {
    let mut pg = postgres::Postgres::start();
    let store = Store::open(&config(&pg)).await.unwrap();
    store
        .create_request(&request("r", "dev", 1), 5)
        .await
        .unwrap();
    pg.kill();
    let err = store.grants("dev", 0).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(!err.to_string().contains(postgres::PASSWORD), "{err}");
    // Opening one that isn't there fails the same way, without the URL.
    let err = Store::open(&config(&pg)).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(!err.to_string().contains(postgres::PASSWORD), "{err}");
}
