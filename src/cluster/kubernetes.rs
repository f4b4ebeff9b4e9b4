//! Members as Kubernetes Leases (`coordination.k8s.io/v1`), one per
//! replica in one namespace: `jmxgate-member-<replica id>`, labelled
//! `jmxgate.io/cluster-member=true`, held by `<replica id>/<instance>`
//! (the instance a random id of this process, so a second process with
//! the same replica id is told apart). Each write carries the
//! `resourceVersion` last read, so two writers never both win; a Lease's
//! age is judged by when this replica saw its `resourceVersion` change
//! (`view::Liveness`), never by its `renewTime` against this clock.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};

use super::view::Seen;
use super::Claim;

pub const LABEL: &str = "jmxgate.io/cluster-member";
const ID_ANNOTATION: &str = "jmxgate.io/replica-id";
/// Where the member's admin listener is (`cluster.advertise_url`).
const ADMIN_URL_ANNOTATION: &str = "jmxgate.io/admin-url";
const NAME_PREFIX: &str = "jmxgate-member-";

/// Whether `id` may follow [`NAME_PREFIX`] in a Lease's name (a DNS
/// subdomain of at most 253 characters).
pub fn is_lease_name_part(id: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !id.is_empty()
        && id.len() + NAME_PREFIX.len() <= 253
        && id.chars().all(ok_char)
        && edge(id.chars().next())
        && edge(id.chars().last())
        && !id.contains("..")
}

/// This replica's Lease and the namespace's.
pub struct Leases {
    api: Api<Lease>,
    me: String,
    holder: String,
    admin_url: Option<String>,
    lease_seconds: i32,
    /// This replica's Lease as last written or read.
    mine: Option<Lease>,
}

fn kube_error(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            format!("the API server said {} {}: {}", s.code, s.reason, s.message)
        }
        other => other.to_string(),
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl Leases {
    pub async fn connect(
        config: &super::ClusterConfig,
        me: &str,
        instance: &str,
    ) -> Result<Leases, String> {
        let client =
            crate::discovery::kubernetes::client_from(config.kubeconfig.as_deref()).await?;
        let namespace = config
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        Ok(Leases {
            api: Api::namespaced(client, &namespace),
            me: me.to_string(),
            holder: format!("{me}/{instance}"),
            admin_url: config.advertise_url.clone(),
            lease_seconds: i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX),
            mine: None,
        })
    }

    fn name(&self) -> String {
        format!("{NAME_PREFIX}{}", self.me)
    }

    fn fresh_lease(&self, transitions: i32, resource_version: Option<String>) -> Lease {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name()),
                labels: Some([(LABEL.to_string(), "true".to_string())].into()),
                annotations: Some(
                    std::iter::once((ID_ANNOTATION.to_string(), self.me.clone()))
                        .chain(
                            self.admin_url
                                .clone()
                                .map(|u| (ADMIN_URL_ANNOTATION.to_string(), u)),
                        )
                        .collect(),
                ),
                resource_version,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.holder.clone()),
                lease_duration_seconds: Some(self.lease_seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Claims this replica's Lease: created when missing; taken over when
    /// `over` is the `resourceVersion` of a Lease this replica saw
    /// unchanged for a whole lease; otherwise `Held` by someone else.
    pub async fn claim(&mut self, over: Option<&str>) -> Result<Claim, String> {
        let name = self.name();
        match self.api.get_opt(&name).await.map_err(kube_error)? {
            None => {
                let created = self
                    .api
                    .create(&PostParams::default(), &self.fresh_lease(0, None))
                    .await;
                self.claimed(created)
            }
            Some(lease) => {
                let rv = lease.metadata.resource_version.clone().unwrap_or_default();
                let holder = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref());
                if holder == Some(self.holder.as_str()) {
                    self.mine = Some(lease);
                    return Ok(Claim::Joined);
                }
                if over != Some(rv.as_str()) {
                    return Ok(Claim::Held { token: rv });
                }
                let transitions = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.lease_transitions)
                    .unwrap_or(0)
                    .saturating_add(1);
                let taken = self.fresh_lease(transitions, Some(rv));
                let replaced = self
                    .api
                    .replace(&name, &PostParams::default(), &taken)
                    .await;
                self.claimed(replaced)
            }
        }
    }

    /// A claim's write: this instance's Lease now, or (409) another
    /// process wrote it first, to be read again.
    fn claimed(&mut self, written: Result<Lease, kube::Error>) -> Result<Claim, String> {
        match written {
            Ok(lease) => {
                self.mine = Some(lease);
                Ok(Claim::Joined)
            }
            Err(e) if is_status(&e, 409) => Ok(Claim::Held {
                token: String::new(),
            }),
            Err(e) => Err(kube_error(e)),
        }
    }

    /// The Lease's transitions: how many instances have held it.
    pub fn epoch(&self) -> Option<i64> {
        self.mine
            .as_ref()
            .and_then(|l| l.spec.as_ref()?.lease_transitions)
            .map(i64::from)
    }

    /// Renews this replica's Lease. `Ok(Some(why))`: another instance
    /// holds it now (this one is fenced).
    pub async fn renew(&mut self) -> Result<Option<String>, String> {
        let name = self.name();
        for _ in 0..2 {
            let Some(mut lease) = self.mine.clone() else {
                return Ok(Some("never joined".into()));
            };
            if let Some(spec) = lease.spec.as_mut() {
                spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
            }
            match self
                .api
                .replace(&name, &PostParams::default(), &lease)
                .await
            {
                Ok(renewed) => {
                    self.mine = Some(renewed);
                    return Ok(None);
                }
                // Written by someone else since: read it and see whose.
                Err(e) if is_status(&e, 409) => {
                    let current = self.api.get_opt(&name).await.map_err(kube_error)?;
                    match current {
                        Some(l)
                            if l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
                                == Some(self.holder.as_str()) =>
                        {
                            self.mine = Some(l);
                        }
                        Some(l) => {
                            let other = l.spec.and_then(|s| s.holder_identity).unwrap_or_default();
                            return Ok(Some(format!(
                                "its Lease {name} is held by another instance ({other}) since this one's lapsed"
                            )));
                        }
                        None => self.mine = None,
                    }
                }
                // Deleted (by a member that took it for a leftover while
                // this replica was away): made anew, unless someone else
                // got there first.
                Err(e) if is_status(&e, 404) => {
                    self.mine = None;
                }
                Err(e) => return Err(kube_error(e)),
            }
            if self.mine.is_none() {
                return match self.claim(None).await? {
                    Claim::Joined => Ok(None),
                    Claim::Held { .. } => Ok(Some(format!(
                        "its Lease {name} was made anew by another instance with the same replica id"
                    ))),
                };
            }
        }
        Err(format!("its Lease {name} keeps changing under it"))
    }

    /// Every member's Lease in the namespace.
    pub async fn read(&self) -> Result<Vec<Seen>, String> {
        let list = self
            .api
            .list(&ListParams::default().labels(&format!("{LABEL}=true")))
            .await
            .map_err(kube_error)?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|l| {
                let annotations = l.metadata.annotations.as_ref()?;
                Some(Seen {
                    id: annotations.get(ID_ANNOTATION)?.clone(),
                    token: l.metadata.resource_version.clone().unwrap_or_default(),
                    age: None,
                    admin_url: annotations.get(ADMIN_URL_ANNOTATION).cloned(),
                })
            })
            .collect())
    }

    /// Deletes a leftover Lease, only if it is still the one seen.
    pub async fn forget(&self, id: &str, token: &str) -> Result<(), String> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(token.to_string()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .api
            .delete(&format!("{NAME_PREFIX}{id}"), &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
            Err(e) => Err(kube_error(e)),
        }
    }

    /// Deletes this replica's Lease (if still its own), so its share moves
    /// at once rather than after a lease.
    pub async fn leave(&mut self) -> Result<(), String> {
        let Some(lease) = self.mine.take() else {
            return Ok(());
        };
        let rv = lease.metadata.resource_version.unwrap_or_default();
        let me = self.me.clone();
        self.forget(&me, &rv).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_dns_subdomains() {
        assert!(is_lease_name_part("jmxgate-0"));
        assert!(is_lease_name_part("gw.eu-1"));
        for bad in ["", "GW", "gw_1", "-gw", "gw-", "a..b", &"a".repeat(250)] {
            assert!(!is_lease_name_part(bad), "{bad}");
        }
    }
}
