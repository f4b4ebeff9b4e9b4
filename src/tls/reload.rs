//! Replacing the certificate, key or client CAs without a restart. New
//! connections get the newest configuration; established ones keep the one
//! they were made with.

use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use rustls::ServerConfig;

use super::config::{server_config, TlsConfig};
use crate::reload_trigger::{stamp, ReloadTrigger, Stamp, Wake};

/// The current rustls server configuration, rebuilt when its files change.
pub struct ReloadingTls {
    cfg: TlsConfig,
    current: ArcSwap<ServerConfig>,
    /// The stamps of the files as of the last build attempt; the lock also
    /// keeps two reloads from running at once.
    stamps: Mutex<Vec<Option<Stamp>>>,
}

impl std::fmt::Debug for ReloadingTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingTls")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl ReloadingTls {
    /// Builds the first configuration; fails as [`server_config`] does.
    pub fn new(cfg: TlsConfig) -> Result<ReloadingTls, String> {
        let stamps = Self::stamps_of(&cfg);
        let current = server_config(&cfg)?;
        Ok(ReloadingTls {
            cfg,
            current: ArcSwap::new(current),
            stamps: Mutex::new(stamps),
        })
    }

    /// The settings this was built from.
    pub fn config(&self) -> &TlsConfig {
        &self.cfg
    }

    /// The configuration for a new connection.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.load_full()
    }

    fn stamps_of(cfg: &TlsConfig) -> Vec<Option<Stamp>> {
        cfg.files().into_iter().map(stamp).collect()
    }

    /// Rebuilds if the certificate, key or CA file changed since the last
    /// attempt. `Ok(true)`: the new configuration is in use; `Ok(false)`:
    /// nothing changed. On error the previous configuration stays in use;
    /// the same broken files are not tried again (and reported again) until
    /// they change once more or [`ReloadingTls::reload`] is called.
    pub fn reload_if_changed(&self) -> Result<bool, String> {
        let mut last = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Self::stamps_of(&self.cfg);
        if *last == now {
            return Ok(false);
        }
        *last = now;
        self.current.store(server_config(&self.cfg)?);
        Ok(true)
    }

    /// Rebuilds unconditionally (SIGHUP). On error the previous
    /// configuration stays in use.
    pub fn reload(&self) -> Result<(), String> {
        let mut last = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
        *last = Self::stamps_of(&self.cfg);
        self.current.store(server_config(&self.cfg)?);
        Ok(())
    }

    /// Checks the files every `reload_interval` (unless it is zero) and
    /// reloads on SIGHUP, logging the outcome. Runs until dropped.
    pub async fn watch(self: Arc<Self>) {
        let mut trigger = ReloadTrigger::new(self.cfg.reload_interval, "TLS");
        loop {
            let forced = trigger.next().await == Wake::Hangup;
            let this = self.clone();
            let result = tokio::task::spawn_blocking(move || {
                if forced {
                    this.reload().map(|()| true)
                } else {
                    this.reload_if_changed()
                }
            })
            .await
            .unwrap_or_else(|e| Err(format!("reload task failed: {e}")));
            let reason = if forced { "SIGHUP" } else { "file changed" };
            match result {
                Ok(true) => tracing::info!(
                    reason,
                    cert_file = %self.cfg.cert_file.display(),
                    key_file = %self.cfg.key_file.display(),
                    client_ca_file = ?self.cfg.client_ca_file,
                    "TLS certificate reloaded"
                ),
                Ok(false) => {}
                Err(e) => tracing::error!(
                    reason,
                    "TLS reload failed, keeping the previous certificate: {e}"
                ),
            }
        }
    }
}
