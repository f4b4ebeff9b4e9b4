//! One Pod to one target, or the reason it has none: pure, trusting
//! nothing the Pod says but its own IP and declared ports.

use super::*;

impl KubernetesDiscovery {
    /// The target of one Pod, or why it has none (for a log line). Pure:
    /// everything comes from `pod` and the entry.
    pub fn pod_target(&self, pod: &Pod) -> Result<TargetConfig, String> {
        let meta = &pod.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        if !is_dns_label(namespace) {
            return Err(format!(
                "namespace \"{}\" is not a namespace name",
                printable(namespace)
            ));
        }
        if !is_dns_subdomain(name) {
            return Err(format!("name \"{}\" is not a pod name", printable(name)));
        }
        let empty = BTreeMap::new();
        let annotations = meta.annotations.as_ref().unwrap_or(&empty);
        let annotation = |key: &str| -> Result<Option<&str>, String> {
            match annotations.get(key) {
                None => Ok(None),
                Some(v) if v.len() > MAX_ANNOTATION_BYTES => Err(format!(
                    "annotation {key} is {} bytes long (at most {MAX_ANNOTATION_BYTES} are read)",
                    v.len()
                )),
                Some(v) if v.chars().any(|c| c.is_control()) => Err(format!(
                    "annotation {key} \"{}\" contains control characters",
                    printable(v)
                )),
                Some(v) => Ok(Some(v.trim())),
            }
        };
        let scrape = annotation(ANNOTATION_SCRAPE)?;
        let opted_in = match scrape.map(str::to_ascii_lowercase).as_deref() {
            None => false,
            Some("false") => return Err(format!("{ANNOTATION_SCRAPE} is \"false\"")),
            Some("true") => true,
            Some(other) => {
                return Err(format!(
                    "annotation {ANNOTATION_SCRAPE} is \"{}\", not \"true\" or \"false\"",
                    printable(other)
                ))
            }
        };
        if meta.deletion_timestamp.is_some() && self.ready_only {
            return Err("it is being deleted".into());
        }
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Unknown");
        let ready = phase == "Running"
            && meta.deletion_timestamp.is_none()
            && status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if self.ready_only && !ready {
            return Err(format!(
                "not Running and Ready (phase {})",
                printable(phase)
            ));
        }
        let ip = match status.and_then(|s| s.pod_ip.as_deref()) {
            None | Some("") => return Err("no IP address yet (status.podIP)".into()),
            Some(text) => text.parse::<IpAddr>().map_err(|_| {
                format!("status.podIP \"{}\" is not an IP address", printable(text))
            })?,
        };
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(format!("status.podIP {ip} is not a unicast address"));
        }
        address::admit(
            ip,
            self.allowed_networks().as_deref(),
            &self.gateway_addresses,
        )?;
        let port = self.port(pod, annotation(ANNOTATION_PORT)?, opted_in)?;
        let scheme = match annotation(ANNOTATION_SCHEME)?
            .map(|v| (ANNOTATION_SCHEME, v))
            .or(annotation(HAWTIO_PROTOCOL)?.map(|v| (HAWTIO_PROTOCOL, v)))
        {
            None => self.scheme,
            Some((key, v)) => match v.to_ascii_lowercase().as_str() {
                "http" => Scheme::Http,
                "https" => Scheme::Https,
                _ => {
                    return Err(format!(
                        "annotation {key} is \"{}\", not \"http\" or \"https\"",
                        printable(v)
                    ))
                }
            },
        };
        let path = match annotation(ANNOTATION_PATH)?
            .map(|v| (ANNOTATION_PATH, v))
            .or(annotation(HAWTIO_PATH)?.map(|v| (HAWTIO_PATH, v)))
        {
            None => self.path.clone(),
            Some((key, v)) => {
                check_path(v)
                    .map_err(|why| format!("annotation {key} \"{}\" {why}", printable(v)))?;
                v.to_string()
            }
        };
        let url = agent_url(scheme, &ip.to_string(), port, &path);
        // The URL must still be at the Pod's address and port, whatever
        // the path held.
        let parsed = crate::agent_settings::parse_agent_url(&url)?;
        let host_ok = match (parsed.host(), ip) {
            (Some(url::Host::Ipv4(a)), IpAddr::V4(b)) => a == b,
            (Some(url::Host::Ipv6(a)), IpAddr::V6(b)) => a == b,
            _ => false,
        };
        if !host_ok || parsed.port_or_known_default() != Some(port) {
            return Err(format!(
                "the agent URL {url} would not be at the pod's own address"
            ));
        }

        let labels = self.target_labels(pod, namespace, name, ready);
        Ok(TargetConfig {
            name: format!("{}{namespace}.{name}", self.name_prefix),
            url,
            labels: labels.into(),
            agent: self.agent_settings_in(namespace).into(),
            origin: self.origin.clone(),
            no_other_keys: NoOtherKeys,
        })
    }

    /// The agent settings of a Pod in `namespace`: the entry's, with the
    /// namespace's credentials when it has some, and never the
    /// credentials of `[target_defaults]`. Nothing the Pod says counts.
    fn agent_settings_in(&self, namespace: &str) -> AgentSettings {
        let mut agent = self.agent.clone();
        if let Some(c) = self.credentials.iter().find(|c| c.namespace == namespace) {
            agent.user = Some(c.user.clone());
            agent.password = c.password.clone();
            agent.password_env = c.password_env.clone();
            agent.password_file = c.password_file.clone();
        }
        agent.own_credentials_only = true;
        agent
    }

    /// A Pod's target labels: its own (at most `MAX_LABELS`, plain and
    /// short ones only), the entry's, then discovery's own, which no Pod
    /// label can take: `discovered_by`, `namespace`, `pod`, `node`,
    /// `controller_kind`, `controller`, and `pod_ready` when not ready.
    fn target_labels(
        &self,
        pod: &Pod,
        namespace: &str,
        name: &str,
        ready: bool,
    ) -> BTreeMap<String, String> {
        let meta = &pod.metadata;
        let mut labels = BTreeMap::new();
        let mut dropped = 0usize;
        if let Some(pod_labels) = &meta.labels {
            for (k, v) in pod_labels {
                if labels.len() >= MAX_LABELS
                    || k.len() > MAX_LABEL_KEY_BYTES
                    || v.len() > MAX_LABEL_VALUE_BYTES
                    || !k.chars().all(is_label_char)
                    || !v.chars().all(is_label_char)
                    || k.is_empty()
                {
                    dropped += 1;
                    continue;
                }
                labels.insert(k.clone(), v.clone());
            }
        }
        if dropped > 0 {
            tracing::debug!(
                pod = %format!("{namespace}/{name}"),
                dropped,
                "pod labels too many, too long or with odd characters were left out"
            );
        }
        for (k, v) in &self.labels {
            labels.insert(k.clone(), v.clone());
        }
        labels.insert(DISCOVERED_BY_LABEL.into(), "kubernetes".into());
        labels.insert("namespace".into(), namespace.into());
        labels.insert("pod".into(), name.into());
        for own in ["node", "controller_kind", "controller", "pod_ready"] {
            labels.remove(own);
        }
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            if is_dns_subdomain(node) {
                labels.insert("node".into(), node.into());
            }
        }
        if let Some(owner) = meta
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
        {
            if owner.kind.len() <= 63 && owner.kind.chars().all(|c| c.is_ascii_alphanumeric()) {
                labels.insert("controller_kind".into(), owner.kind.clone());
            }
            if is_dns_subdomain(&owner.name) {
                labels.insert("controller".into(), owner.name.clone());
            }
        }
        if !ready {
            labels.insert("pod_ready".into(), "false".into());
        }
        labels
    }

    /// The agent's port: the one `jmxgate.io/port` names (by name or
    /// number) among the Pod's declared TCP ports, else the port named
    /// `port_name`, else 8778 with `jmxgate.io/scrape: "true"`.
    fn port(&self, pod: &Pod, chosen: Option<&str>, opted_in: bool) -> Result<u16, String> {
        let declared: Vec<(Option<&str>, i32)> = pod
            .spec
            .as_ref()
            .map(|s| {
                s.containers
                    .iter()
                    .flat_map(|c| c.ports.iter().flatten())
                    .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
                    .map(|p| (p.name.as_deref(), p.container_port))
                    .collect()
            })
            .unwrap_or_default();
        let valid = |n: i32| u16::try_from(n).ok().filter(|n| *n > 0);
        if let Some(chosen) = chosen {
            let found = match chosen.parse::<i32>() {
                Ok(n) => declared.iter().find(|(_, p)| *p == n),
                Err(_) => declared.iter().find(|(name, _)| *name == Some(chosen)),
            };
            return match found.and_then(|(_, p)| valid(*p)) {
                Some(p) => Ok(p),
                None => Err(format!(
                    "annotation {ANNOTATION_PORT} \"{}\" is not a TCP port the pod declares",
                    printable(chosen)
                )),
            };
        }
        if let Some((_, p)) = declared
            .iter()
            .find(|(name, _)| *name == Some(self.port_name.as_str()))
        {
            return valid(*p).ok_or_else(|| format!("port {} is not a port number", p));
        }
        if opted_in {
            return Ok(DEFAULT_PORT);
        }
        Err(format!(
            "no container port named \"{}\" (and no {ANNOTATION_SCRAPE}: \"true\" for port {DEFAULT_PORT})",
            self.port_name
        ))
    }
}
