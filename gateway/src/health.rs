//! How each platform of this gateway is doing — connecting, connected, retrying and why, when it
//! was last heard from, how many deliveries failed — reported to the daemon every few seconds,
//! where `clibotctl status` and `clibot-gateway status` show it. Nothing here matters after a
//! restart: the next report replaces it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clibot_proto::v1;

/// How often the daemon hears from the gateway.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// Every platform's state, shared by the tasks that serve them.
#[derive(Clone, Default)]
pub struct Health(Arc<Mutex<BTreeMap<String, v1::GatewayStatus>>>);

/// One platform's handle on [`Health`].
#[derive(Clone)]
pub struct PlatformHealth {
    health: Health,
    platform: String,
}

/// Unix time in milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Health {
    pub fn platform(&self, name: &str) -> PlatformHealth {
        self.update(name, |_| {});
        PlatformHealth {
            health: self.clone(),
            platform: name.to_string(),
        }
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut v1::GatewayStatus)) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let entry = all
            .entry(name.to_string())
            .or_insert_with(|| v1::GatewayStatus {
                platform: name.to_string(),
                state: "connecting".into(),
                pid: std::process::id(),
                ..Default::default()
            });
        f(entry);
    }

    fn snapshot(&self) -> Vec<v1::GatewayStatus> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Reports to the daemon for as long as the gateway runs (a missing daemon is retried).
    pub async fn report(self, socket: PathBuf) {
        let mut client: Option<clibot_proto::Client> = None;
        loop {
            if client.is_none() {
                client = clibot_proto::connect(&socket).await.ok();
            }
            if let Some(c) = client.as_mut() {
                let req = v1::ReportGatewayRequest {
                    platforms: self.snapshot(),
                };
                if c.report_gateway(req).await.is_err() {
                    client = None;
                }
            }
            tokio::time::sleep(REPORT_EVERY).await;
        }
    }
}

impl PlatformHealth {
    pub fn name(&self) -> &str {
        &self.platform
    }

    /// A new state ("connecting", "connected", "retrying") and why.
    pub fn state(&self, state: &str, detail: &str) {
        self.health.update(&self.platform, |s| {
            s.state = state.to_string();
            s.detail = detail.to_string();
        });
    }

    /// The platform answered (a message arrived, a send was accepted).
    pub fn heard(&self) {
        self.health
            .update(&self.platform, |s| s.last_heard_ms = now_ms());
    }

    /// An event was delivered to a chat.
    pub fn delivered(&self) {
        self.health.update(&self.platform, |s| {
            s.deliveries += 1;
            s.last_heard_ms = now_ms();
        });
    }

    /// A delivery failed (it is retried, or its chat suspended).
    pub fn failed(&self) {
        self.health
            .update(&self.platform, |s| s.deliveries_failed += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_platform_keeps_its_own_state() {
        let h = Health::default();
        let t = h.platform("telegram");
        let d = h.platform("discord");
        t.state("connected", "");
        t.heard();
        d.state("retrying", "bad token");
        d.failed();
        d.failed();
        let s = h.snapshot();
        assert_eq!(s.len(), 2);
        let by = |n: &str| {
            s.iter()
                .find(|x| x.platform == n)
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(by("telegram").state, "connected");
        assert!(by("telegram").last_heard_ms > 0);
        assert_eq!(
            (
                by("discord").state.as_str(),
                by("discord").deliveries_failed
            ),
            ("retrying", 2)
        );
        assert_eq!(by("discord").detail, "bad token");
    }
}
