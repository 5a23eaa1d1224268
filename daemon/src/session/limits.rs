//! The session limits and the slow safety net: caps at spawn, idle sessions stopped, vanished sessions noticed.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use crate::core::*;
use crate::error::CoreError;
use crate::model::State;
use crate::tmux::MuxError;

impl Daemon {
    /// Compares every managed session with tmux and records those whose process exited or
    /// whose tmux session vanished. This is the slow safety net; it costs one tmux call.
    pub async fn check_sessions(&self) {
        // Which sessions to check is decided before tmux is asked: a session spawned while the
        // list is in flight is not in it, and must not be taken for gone.
        let (candidates, in_place): (Vec<_>, Vec<_>) = self
            .sessions()
            .filter_map(|e| {
                (!e.stopping && !e.rec.state.is_exited() && !e.rec.unmanaged).then(|| e.rec.clone())
            })
            .into_iter()
            .partition(|r| r.server.is_empty());
        self.check_unmanaged();
        let candidates: Vec<(String, String, String)> = candidates
            .into_iter()
            .map(|r| (r.name, r.id, r.tmux_id))
            .collect();
        self.check_in_place(in_place).await;
        // Working or waiting on a prompt: a CLI that ends now ends in the middle of its turn.
        let mid_turn = |name: &str| {
            self.sessions()
                .get(name, |e| {
                    matches!(e.rec.state, State::Working | State::Waiting)
                })
                .unwrap_or(false)
        };
        let live = match self.mux().list_sessions().await {
            Ok(l) => l,
            Err(MuxError::NoServer(_)) => Vec::new(),
            Err(e) => {
                warn!("cannot list tmux sessions: {e}");
                return;
            }
        };
        for (name, id, tmux_id) in candidates {
            match live.iter().find(|s| s.meta.id == id || s.id == tmux_id) {
                Some(s) if s.dead => {
                    let status = match s.dead_status {
                        Some(st) => Some(st),
                        None => self.settled_exit_status(&id, &tmux_id).await,
                    };
                    let output = self.last_words(&name, &s.pane).await;
                    let crashed = mid_turn(&name).then(|| crash_detail(status, &output));
                    if !self.mark_exited_with(&name, status, "the CLI exited", output) {
                        // Another check saw this exit first and handled it.
                        continue;
                    }
                    let delegates = crashed.is_some()
                        && self.live().config.delegation.chain_for("crash").is_some()
                        && self
                            .sessions()
                            .get(&name, |e| e.rec.delegate)
                            .unwrap_or(false);
                    if let Some(detail) = &crashed {
                        self.consider_delegation(&name, "crash", detail);
                    }
                    // A crash that hands the work on is not also restarted here.
                    if !delegates {
                        self.consider_crash_restart(&name, status, crashed.is_some());
                    }
                }
                Some(_) => {}
                None => {
                    self.mark_exited(&name, None, "its tmux session is gone");
                }
            }
        }
    }

    /// [`Self::check_sessions`] for sessions adopted where they run on other servers: each is
    /// looked for in its server's panes, with the same process.
    async fn check_in_place(&self, recs: Vec<crate::model::SessionRecord>) {
        let mut listed: std::collections::HashMap<String, Vec<crate::tmux::MuxSession>> =
            Default::default();
        for rec in recs {
            if !listed.contains_key(&rec.server) {
                let rows = match self.mux_on(&rec.server) {
                    Ok(m) => match m.list_panes().await {
                        Ok(rows) => rows,
                        Err(MuxError::NoServer(_)) => Vec::new(),
                        Err(e) => {
                            warn!(server = %rec.server, "cannot list tmux panes: {e}");
                            continue;
                        }
                    },
                    Err(_) => continue,
                };
                listed.insert(rec.server.clone(), rows);
            }
            let rows = listed
                .get(&rec.server)
                .map(Vec::as_slice)
                .unwrap_or_default();
            match rows
                .iter()
                .find(|p| p.pane == rec.pane && p.id == rec.tmux_id && p.pid == rec.pid)
            {
                Some(p) if p.dead => {
                    let output = self.last_words(&rec.name, &rec.pane).await;
                    self.mark_exited_with(&rec.name, p.dead_status, "the CLI exited", output);
                }
                Some(_) => {}
                None => {
                    self.mark_exited(&rec.name, None, "its pane on the other tmux server is gone");
                }
            }
            if self
                .sessions()
                .get(&rec.name, |e| e.rec.state.is_exited())
                .unwrap_or(false)
            {
                self.close_server_if_unused(&rec.server).await;
            }
        }
    }

    /// The chat user a spawn for `owner` is capped for, with their platform's cap: `None` for
    /// the local user and for admins, who are not capped per user.
    pub(crate) fn capped_owner(&self, owner: &str) -> Option<(String, String, usize)> {
        let (platform, user) = owner.split_once(':')?;
        if self.access().known(platform, user) == Some(true) {
            return None;
        }
        let cap = self.access().platform(platform).max_sessions_per_user;
        Some((platform.to_string(), user.to_string(), cap))
    }

    /// Refuses to start session `name` when `[daemon] max_sessions` run already, or when its
    /// chat user (`owner`: platform, user, cap) runs their cap. Exited sessions do not count.
    /// The refusal names the idle sessions that could be stopped to make room.
    pub(crate) fn check_limits(
        &self,
        sessions: &Table,
        name: &str,
        owner: Option<&(String, String, usize)>,
    ) -> Result<(), CoreError> {
        // An exited session being restarted counts: it is about to run, and two restarts at
        // once must not both find room for one.
        let running = |e: &&Entry| e.rec.name != name && (!e.rec.state.is_exited() || e.stopping);
        let hint = |of: &dyn Fn(&Entry) -> bool, raise: &str| {
            let mut idle: Vec<(Duration, &str)> = sessions
                .values()
                .filter(|e| running(e) && of(e))
                .filter_map(|e| idle_for(e).map(|d| (d, e.rec.name.as_str())))
                .collect();
            idle.sort_by_key(|(d, _)| std::cmp::Reverse(*d));
            if idle.is_empty() {
                format!("none of them is idle now: stop one you no longer need, or {raise}")
            } else {
                // The longest idle first, a few of them: a message, not a listing.
                const SHOWN: usize = 5;
                let mut list = idle
                    .iter()
                    .take(SHOWN)
                    .map(|(d, n)| format!("{n} (idle {})", crate::duration::format_age(*d)))
                    .collect::<Vec<_>>()
                    .join(", ");
                if idle.len() > SHOWN {
                    list.push_str(&format!(
                        " and {} more (`clibotctl list --state idle`)",
                        idle.len() - SHOWN
                    ));
                }
                format!("idle ones you could stop: {list}")
            }
        };
        let total = sessions.values().filter(running).count();
        let max = self.settings().config.daemon.max_sessions;
        if total >= max {
            return Err(CoreError::TooManySessions {
                name: name.to_string(),
                running: total,
                hint: hint(&|_| true, "raise [daemon] max_sessions"),
            });
        }
        if let Some((platform, user, cap)) = owner {
            let key = format!("{platform}:{user}");
            let theirs = |e: &Entry| e.rec.owner == key;
            let count = sessions
                .values()
                .filter(running)
                .filter(|e| theirs(e))
                .count();
            if count >= *cap {
                return Err(CoreError::TooManyForUser {
                    name: name.to_string(),
                    user: key.clone(),
                    platform: platform.clone(),
                    running: match count {
                        1 => "1 session".to_string(),
                        n => format!("{n} sessions"),
                    },
                    hint: hint(&theirs, "ask an admin"),
                });
            }
        }
        Ok(())
    }

    /// Stops, gracefully, every session idle for longer than its CLI's `idle_stop_after` (else
    /// `[daemon] idle_stop_after`), and keeps it hibernated with the reason: its next message
    /// wakes it, resuming its conversation (`super::hibernate`). Adopted sessions are left
    /// alone: clibot did not start them.
    pub async fn reap_idle(&self) {
        let default = self.settings().config.daemon.idle_stop_after;
        let live = self.live();
        let after_for = |cli: &str| {
            live.clis
                .get(cli)
                .and_then(|c| c.idle_stop_after)
                .unwrap_or(default)
        };
        let due: Vec<(String, Duration)> = self.sessions().filter_map(|e| {
            if e.rec.adopted {
                return None;
            }
            let after = after_for(&e.rec.cli);
            let idle = idle_for(e)?;
            (!after.is_zero() && idle >= after).then(|| (e.rec.name.clone(), after))
        });
        for (name, after) in due {
            let span = info_span!("session", session = %name);
            self.reap(&name, after).instrument(span).await;
        }
    }

    async fn reap(&self, name: &str, after: Duration) {
        // Checked again as it is reserved: input may have come meanwhile.
        let rec = self.sessions().update(name, |e| {
            // A CLI adopted where it runs in the user's own tmux is theirs: never reaped.
            if !e.rec.server.is_empty() || e.rec.unmanaged || idle_for(e).is_none_or(|d| d < after)
            {
                return None;
            }
            e.stopping = true;
            e.rt.hibernating = true;
            Some(e.rec.clone())
        });
        let Some(rec) = rec.flatten() else {
            return;
        };
        self.stop_watcher(name);
        let reason = format!("idle for {}", crate::duration::format_duration(after));
        info!("stopping the session: {reason}");
        let stopped = self.stop_inner(&rec, false, None).await;
        self.sessions().update(name, |e| {
            e.stopping = false;
            e.rt.hibernating = false;
        });
        match stopped {
            Ok(outcome) => {
                self.mark_hibernated(name, outcome.exit_status, &reason);
                // A message that came while it was being stopped wakes it at once.
                let queued = self
                    .sessions()
                    .get(name, |e| !e.rec.queue.is_empty())
                    .unwrap_or(false);
                if queued {
                    self.wake_if_hibernated(name);
                }
            }
            Err(e) => {
                self.start_watcher(name);
                warn!("could not stop the idle session: {e}");
                self.deliver_queued(name);
            }
        }
    }

    /// Runs [`Daemon::check_sessions`] and [`Daemon::reap_idle`] every `poll_interval_ms`
    /// until `shutdown` — or, with many sessions, every 20 ms per running session: the check
    /// is one `list-sessions`, which costs the tmux server time in proportion to its sessions,
    /// and it is only the safety net (each session's watcher reports its end at once).
    pub async fn run_monitor(self, shutdown: CancellationToken) {
        let base = Duration::from_millis(self.settings().config.daemon.poll_interval_ms.max(100));
        loop {
            let running = self.sessions().count(|e| !e.rec.state.is_exited()) as u32;
            let period = base.max(SAFETY_NET_PER_SESSION * running);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(period) => {
                    self.check_sessions().await;
                    self.reap_idle().await;
                    self.check_unanswered().await;
                    self.scan_outboxes().await;
                }
            }
        }
    }
}

/// What a delegation for a crash says happened: the exit status and the CLI's last line.
fn crash_detail(status: Option<i32>, output: &str) -> String {
    let mut d = match status {
        Some(s) => format!("it exited with status {s} mid-turn"),
        None => "it exited mid-turn".to_string(),
    };
    if let Some(last) = output.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
        d.push_str(&format!(
            ": {}",
            crate::automation::delegation::one_line(last, 160)
        ));
    }
    d
}
