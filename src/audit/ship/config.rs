//! The `[[audit.sinks]]` settings (a leaf: nothing of the crate here).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// One place the audit files are shipped to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// Names the sink in metrics, logs and its cursor file.
    pub name: String,
    #[serde(default)]
    pub kind: SinkKind,
    /// `host:port` of the collector (RFC 5425: syslog over TLS, 6514).
    pub address: String,
    /// PEM bundle of the CAs the collector's certificate must chain to.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM chain) for collectors that require mTLS.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// Its private key (never logged).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Name the collector's certificate must carry; the host of `address`
    /// when unset.
    #[serde(default)]
    pub server_name: Option<String>,
    #[serde(default)]
    pub facility: Facility,
    /// Records per connection (each batch is confirmed by closing it).
    #[serde(default = "default_batch_records")]
    pub batch_records: usize,
    /// How long a batch waits for more records before it goes.
    #[serde(default = "default_linger", with = "humantime_serde")]
    pub linger: Duration,
    /// Unsent records beyond which the sink warns.
    #[serde(default = "default_max_lag_records")]
    pub max_lag_records: u64,
    /// How long a connect, handshake, send or the collector's close may take.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// RFC 5424 messages over TLS (RFC 5425), octet-counted.
    #[default]
    Syslog,
}

/// The syslog facility of the messages (severity is always notice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Facility {
    Auth,
    Authpriv,
    Daemon,
    User,
    #[default]
    Local0,
    Local1,
    Local2,
    Local3,
    Local4,
    Local5,
    Local6,
    Local7,
}

impl Facility {
    /// The facility's number (RFC 5424 table 1).
    pub fn code(self) -> u8 {
        match self {
            Facility::User => 1,
            Facility::Daemon => 3,
            Facility::Auth => 4,
            Facility::Authpriv => 10,
            Facility::Local0 => 16,
            Facility::Local1 => 17,
            Facility::Local2 => 18,
            Facility::Local3 => 19,
            Facility::Local4 => 20,
            Facility::Local5 => 21,
            Facility::Local6 => 22,
            Facility::Local7 => 23,
        }
    }
}

fn default_batch_records() -> usize {
    1000
}

fn default_linger() -> Duration {
    Duration::from_millis(200)
}

fn default_max_lag_records() -> u64 {
    100_000
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

impl SinkConfig {
    /// The host and port of `address`.
    pub fn host_port(&self) -> Result<(String, u16), String> {
        let (host, port) = self.address.rsplit_once(':').ok_or_else(|| {
            format!(
                "address \"{}\" has no port; write host:port (6514 is syslog over TLS)",
                self.address
            )
        })?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("address \"{}\": \"{port}\" is not a port", self.address))?;
        if host.is_empty() {
            return Err(format!("address \"{}\" has no host", self.address));
        }
        Ok((host.to_string(), port))
    }

    /// The certificate name the collector must present.
    pub fn server_name(&self) -> Result<String, String> {
        match &self.server_name {
            Some(n) => Ok(n.clone()),
            None => self.host_port().map(|(h, _)| h),
        }
    }
}

/// What is wrong with the sinks, each naming its key.
pub fn problems(sinks: &[SinkConfig], max_dir_bytes: Option<u64>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for s in sinks {
        let at = format!("audit.sinks \"{}\"", s.name);
        let valid_name = !s.name.is_empty()
            && s.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid_name {
            problems.push(format!(
                "{at}: name must be letters, digits, '-' or '_' (it names the cursor file)"
            ));
        }
        if !seen.insert(s.name.as_str()) {
            problems.push(format!(
                "{at}: another sink has this name; each needs its own"
            ));
        }
        if let Err(e) = s.host_port() {
            problems.push(format!("{at}: {e}"));
        }
        if s.ca_file.is_none() {
            problems.push(format!(
                "{at}: ca_file is required: the CA bundle that verifies the collector's certificate"
            ));
        }
        if s.cert_file.is_some() != s.key_file.is_some() {
            problems.push(format!(
                "{at}: cert_file and key_file go together (the client certificate and its key)"
            ));
        }
        if s.batch_records == 0 {
            problems.push(format!("{at}: batch_records must be at least 1"));
        }
        if s.timeout.is_zero() {
            problems.push(format!("{at}: timeout must be longer than 0s"));
        }
    }
    if max_dir_bytes.is_some() && sinks.is_empty() {
        problems.push(
            "audit.max_dir_bytes: deletes only files every sink has shipped, and there is no [[audit.sinks]]; remove it or add a sink".into(),
        );
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(name: &str, address: &str) -> SinkConfig {
        SinkConfig {
            name: name.into(),
            kind: SinkKind::Syslog,
            address: address.into(),
            ca_file: Some("ca.pem".into()),
            cert_file: None,
            key_file: None,
            server_name: None,
            facility: Facility::default(),
            batch_records: 1000,
            linger: default_linger(),
            max_lag_records: 10,
            timeout: default_timeout(),
        }
    }

    #[test]
    fn problems_name_the_sink_and_the_fix() {
        assert!(problems(&[sink("siem", "siem.example:6514")], None).is_empty());
        let p = problems(&[sink("siem", "siem.example")], None);
        assert!(p[0].contains("has no port"), "{p:?}");
        let p = problems(&[sink("a", "h:1"), sink("a", "h:2")], None);
        assert!(p[0].contains("another sink has this name"), "{p:?}");
        let mut no_ca = sink("b", "h:1");
        no_ca.ca_file = None;
        assert!(problems(&[no_ca], None)[0].contains("ca_file is required"));
        assert!(problems(&[], Some(1))[0].contains("max_dir_bytes"));
        assert!(problems(&[sink("a/b", "h:1")], None)[0].contains("name must be"));
        assert_eq!(
            sink("v6", "[::1]:6514").host_port().unwrap(),
            ("::1".into(), 6514)
        );
    }
}
