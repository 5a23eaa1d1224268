//! How each platform of this gateway is doing — connecting, connected, retrying and why, when it
//! was last heard from, how many deliveries failed — reported to the daemon every few seconds,
//! where `clibotctl status` and `clibot-gateway status` show it. Nothing here matters after a
//! restart: the next report replaces it. Each platform's [`Progress`] (the watchdog's view of
//! its receive loop) goes with the report; the daemon answers with the chats where the admins
//! are told when a platform is down (see `down.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clibot_proto::v1;

use crate::platforms::Platform;
use crate::progress::Progress;

/// How often the daemon hears from the gateway.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// Every platform's state, shared by the tasks that serve them.
#[derive(Clone, Default)]
pub struct Health(Arc<Inner>);

#[derive(Default)]
struct Inner {
    platforms: Mutex<BTreeMap<String, v1::GatewayStatus>>,
    progress: Mutex<BTreeMap<String, Progress>>,
    /// `[gateway] stall_after` (zero: the default).
    stall_after: Duration,
    /// "PLATFORM:CHAT" where the admins hear that a platform is down, as the daemon last said.
    notice_chats: Mutex<Vec<String>>,
    /// The platforms connected now, to send such a notice through.
    senders: Mutex<BTreeMap<String, Arc<dyn Platform>>>,
    /// With several machines: since when each cannot be reached (0: it answers).
    machines: Mutex<BTreeMap<String, i64>>,
    /// A platform appeared or changed state: report now, not at the next tick, so `doctor`
    /// and `status` never miss a short-lived gateway (a `--console` trial).
    changed: tokio::sync::Notify,
}

/// One platform's handle on [`Health`].
#[derive(Clone)]
pub struct PlatformHealth {
    health: Health,
    platform: String,
    progress: Progress,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Unix time in milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Health {
    /// With `[gateway] stall_after` (zero: the default).
    pub fn new(stall_after: Duration) -> Health {
        Health(Arc::new(Inner {
            stall_after,
            ..Default::default()
        }))
    }

    pub fn platform(&self, name: &str) -> PlatformHealth {
        self.update(name, |_| {});
        // The console has no receive loop to watch (it waits for what is typed).
        let progress = if name == "console" {
            Progress::new(self.0.stall_after)
        } else {
            lock(&self.0.progress)
                .entry(name.to_string())
                .or_insert_with(|| Progress::new(self.0.stall_after))
                .clone()
        };
        PlatformHealth {
            health: self.clone(),
            platform: name.to_string(),
            progress,
        }
    }

    /// Every platform with its state and progress.
    pub fn platforms(&self) -> Vec<(String, String, Progress)> {
        let states = lock(&self.0.platforms);
        lock(&self.0.progress)
            .iter()
            .map(|(name, p)| {
                let state = states
                    .get(name)
                    .map(|s| s.state.clone())
                    .unwrap_or_default();
                (name.clone(), state, p.clone())
            })
            .collect()
    }

    /// The chats of `platform` where the admins hear that another platform is down.
    pub fn notice_chats(&self, platform: &str) -> Vec<String> {
        lock(&self.0.notice_chats)
            .iter()
            .filter_map(|pc| pc.split_once(':'))
            .filter(|(p, _)| *p == platform)
            .map(|(_, c)| c.to_string())
            .collect()
    }

    /// The platform `name` is connected now and sends through `platform`.
    pub fn sender(&self, name: &str) -> Option<Arc<dyn Platform>> {
        lock(&self.0.senders).get(name).cloned()
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut v1::GatewayStatus)) {
        let mut all = lock(&self.0.platforms);
        let before = all.get(name).map(|s| s.state.clone());
        let entry = all
            .entry(name.to_string())
            .or_insert_with(|| v1::GatewayStatus {
                platform: name.to_string(),
                state: "connecting".into(),
                pid: std::process::id(),
                ..Default::default()
            });
        f(entry);
        if before.as_deref() != Some(entry.state.as_str()) {
            self.0.changed.notify_one();
        }
    }

    fn snapshot(&self) -> Vec<v1::GatewayStatus> {
        let progress = lock(&self.0.progress).clone();
        let machines: Vec<v1::GatewayMachine> = lock(&self.0.machines)
            .iter()
            .map(|(name, since)| v1::GatewayMachine {
                name: name.clone(),
                down_since_ms: *since,
            })
            .collect();
        lock(&self.0.platforms)
            .values()
            .cloned()
            .map(|mut s| {
                if let Some(p) = progress.get(&s.platform) {
                    let (last, restarts, last_restart, stalled) = p.report();
                    s.last_progress_ms = last;
                    s.restarts = restarts;
                    s.last_restart_ms = last_restart;
                    s.stalled = stalled;
                    s.stall_after_ms = p.stall_after().as_millis() as i64;
                }
                s.machines = machines.clone();
                s
            })
            .collect()
    }

    /// Reports to the daemon for as long as the gateway runs (a missing daemon is retried).
    pub async fn report(self, socket: clibot_proto::Target) {
        let mut client: Option<clibot_proto::Client> = None;
        loop {
            if client.is_none() {
                client = clibot_proto::connect_to(&socket).await.ok();
            }
            if let Some(c) = client.as_mut() {
                let req = v1::ReportGatewayRequest {
                    platforms: self.snapshot(),
                };
                match c.report_gateway(req).await {
                    Ok(r) => *lock(&self.0.notice_chats) = r.into_inner().notice_chats,
                    Err(_) => client = None,
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(REPORT_EVERY) => {}
                _ = self.0.changed.notified() => {}
            }
        }
    }
}

impl PlatformHealth {
    pub fn name(&self) -> &str {
        &self.platform
    }

    /// The watchdog's view of this platform's receive loop.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The platform is connected and sends through `platform` (None: not connected).
    pub fn connected_through(&self, platform: Option<Arc<dyn Platform>>) {
        let mut senders = lock(&self.health.0.senders);
        match platform {
            Some(p) => senders.insert(self.platform.clone(), p),
            None => senders.remove(&self.platform),
        };
    }

    /// A new state ("connecting", "connected", "retrying") and why.
    pub fn state(&self, state: &str, detail: &str) {
        self.health.update(&self.platform, |s| {
            s.state = state.to_string();
            s.detail = detail.to_string();
        });
    }

    /// Whether machine `name` answers (`down_since_ms` 0) or since when it does not; shown in
    /// `clibotctl status` with every platform of the gateway.
    pub fn machine(&self, name: &str, down_since_ms: i64) {
        lock(&self.health.0.machines).insert(name.to_string(), down_since_ms);
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
        // The watchdog's view goes with the report.
        t.progress().cycle();
        d.progress().restarted();
        let s = h.snapshot();
        let t = s
            .iter()
            .find(|x| x.platform == "telegram")
            .cloned()
            .unwrap_or_default();
        let d = s
            .iter()
            .find(|x| x.platform == "discord")
            .cloned()
            .unwrap_or_default();
        assert!(t.last_progress_ms > 0 && !t.stalled && t.stall_after_ms == 90_000);
        assert!(d.stalled && d.restarts == 1 && d.last_restart_ms > 0);
    }
}
