//! Following a session: one watcher task per session wakes on its pane's output (pushed by tmux), reads the screen after a few quiet milliseconds, and ticks only while time itself can change something.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

use crate::cli::Adapter;
use crate::cli::detect::Pack;
use crate::core::*;
use crate::model::State;
use crate::tmux::{MuxError, WatchEvent};

use super::shared::*;

impl Daemon {
    pub(crate) fn kind_of(&self, cli: &str) -> Option<(Arc<dyn Adapter>, Arc<Pack>)> {
        self.live()
            .kinds
            .get(cli)
            .map(|k| (k.adapter.clone(), k.pack.clone()))
    }

    /// Starts the session's watcher (idempotent).
    pub(crate) fn start_watcher(&self, name: &str) {
        let token = CancellationToken::new();
        let started = self.sessions().update(name, |e| {
            if e.rec.state.is_exited() || e.rt.watcher.is_some() {
                return false;
            }
            e.rt.watcher = Some(token.clone());
            true
        });
        if started != Some(true) {
            return;
        }
        let d = self.clone();
        let name = name.to_string();
        let span = info_span!("session", session = %name);
        if let Some(port) = self.api_port(&name) {
            let (d, name, token) = (d.clone(), name.clone(), token.clone());
            tokio::spawn(
                async move { d.api_link(&name, port, token).await }.instrument(span.clone()),
            );
        }
        tokio::spawn(async move { d.watch_loop(&name, token).await }.instrument(span));
    }

    /// The session's CLI serves an API that clibot follows and has not given up on: readiness,
    /// turns and prompts come from it, not from the screen.
    pub(crate) fn awaits_api(&self, e: &crate::core::Entry) -> bool {
        e.rec.api_port != 0
            && !e.rt.api_gave_up
            && self
                .kind_of(&e.rec.cli)
                .is_some_and(|(a, _)| a.serves_api())
    }

    /// The port of the API a session's CLI serves, if it serves one.
    pub(crate) fn api_port(&self, name: &str) -> Option<u16> {
        self.sessions()
            .get(name, |e| {
                let serves = self
                    .kind_of(&e.rec.cli)
                    .is_some_and(|(a, _)| a.serves_api());
                (serves && e.rec.api_port != 0).then_some(e.rec.api_port)
            })
            .flatten()
    }

    pub(crate) fn stop_watcher(&self, name: &str) {
        // Cancelled in the same step as it is taken: a watcher started meanwhile is never
        // taken for this one.
        self.sessions().update(name, |e| {
            if let Some(t) = e.rt.watcher.take() {
                t.cancel();
            }
        });
    }

    async fn watch_loop(self, name: &str, cancel: CancellationToken) {
        let shutdown = self.shutdown_token().clone();
        let mut backoff = Duration::from_millis(200);
        // The session is watched (all its panes' output wakes the watcher); the CLI's own
        // pane is read. Until the session is gone.
        'outer: while let Some((target, pane, poke)) = self.sessions().get(name, |e| {
            (
                e.rec.tmux_id.clone(),
                e.rec.target().to_string(),
                e.rt.poke.clone(),
            )
        }) {
            let mut rx = match self.mux_of(name).watch(&target).await {
                // Stopped (released) while the watch was being set up: undo it.
                Ok(_) if cancel.is_cancelled() => {
                    let _ = self.mux_of(name).unwatch(&target).await;
                    break;
                }
                Ok(rx) => rx,
                Err(e) => {
                    warn!("cannot watch the session's output: {e}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => { backoff = (backoff * 2).min(Duration::from_secs(10)); continue },
                        _ = cancel.cancelled() => break,
                        _ = shutdown.cancelled() => break,
                    }
                }
            };
            // The first read tells where the session stands (a restarted daemon, a fresh spawn).
            let mut check_at: Option<Instant> = Some(Instant::now());
            let mut first_unread: Option<Instant> = None;
            // The tick runs only while time itself can change something (a running turn, a
            // start, a pending prompt or confirmation): 50 quiet sessions cost no wake-ups.
            let mut tick_at: Option<Instant> = Some(Instant::now() + TICK);
            loop {
                let sleep_until = check_at.map(tokio::time::Instant::from_std);
                if tick_at.is_none() && self.wants_tick(name) {
                    tick_at = Some(Instant::now() + TICK);
                }
                let tick_until = tick_at.map(tokio::time::Instant::from_std);
                tokio::select! {
                    ev = rx.recv() => match ev {
                        Some(WatchEvent::Output) => {
                            let now = Instant::now();
                            self.note_output(name);
                            let first = *first_unread.get_or_insert(now);
                            check_at = Some((now + DEBOUNCE).min(first + MAX_DEBOUNCE));
                        }
                        Some(WatchEvent::Closed) | None => {
                            // The session ended, or tmux went away: let the exit check decide.
                            self.check_sessions().await;
                            let alive = self.sessions().alive(name);
                            if !alive {
                                break 'outer;
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(backoff) => { backoff = (backoff * 2).min(Duration::from_secs(10)); continue 'outer },
                                _ = cancel.cancelled() => break 'outer,
                                _ = shutdown.cancelled() => break 'outer,
                            }
                        }
                    },
                    _ = async { match sleep_until { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                        check_at = None;
                        first_unread = None;
                        self.read_screen(name, &pane).await;
                    }
                    _ = poke.notified() => check_at = Some(Instant::now()),
                    _ = async { match tick_until { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                        tick_at = None;
                        self.on_tick(name, &pane).await;
                    }
                    _ = cancel.cancelled() => break 'outer,
                    _ = shutdown.cancelled() => break 'outer,
                }
                backoff = Duration::from_millis(200);
            }
        }
        debug!("watcher ended");
    }

    /// The session's CLI tells by hook when it takes a prompt, and its hooks reach the daemon.
    fn start_hook_live(&self, e: &crate::core::Entry) -> bool {
        !e.rec.hook_token.is_empty()
            && self
                .kind_of(&e.rec.cli)
                .is_some_and(|(a, _)| a.signals_turn_start())
    }

    /// Without a start hook, a hook-driven CLI whose screen shows when it works (Codex) confirms
    /// that it took the input by that screen: output alone may be the echo of text sitting
    /// unsent in its composer, after an Enter it ignored while finishing the previous turn.
    pub(crate) fn confirms_by_screen(&self, e: &crate::core::Entry) -> bool {
        !self.start_hook_live(e)
            && self
                .kind_of(&e.rec.cli)
                .is_some_and(|(a, p)| a.completes_by_hook() && p.shows_busy())
    }

    /// Whether the session has something that only time can settle.
    fn wants_tick(&self, name: &str) -> bool {
        self.sessions()
            .get(name, |e| {
                matches!(e.rec.state, State::Working | State::Starting)
                    || e.rt.turn.prompt_pending_since.is_some()
                    || e.rt.turn.confirm_by.is_some()
            })
            .unwrap_or(false)
    }

    fn note_output(&self, name: &str) {
        self.sessions().update(name, |e| {
            let caps = self.turn_caps(e);
            e.rt.turn.output(Instant::now(), caps.as_ref());
            if e.rec.stalled {
                e.rec.stalled = false;
            }
        });
    }

    async fn read_screen(&self, name: &str, target: &str) {
        let Some((cli, learn_idle)) = self.sessions().get(name, |e| {
            // Never learned from a turn that outlived a daemon restart: its foreground is the
            // command still running, not the CLI.
            let calm = e.rec.state == State::Idle
                && e.rt.turn.started.is_none()
                && e.rec.queue.is_empty()
                && !e.rt.turn.recovered;
            (e.rec.cli.clone(), calm && e.rt.idle_foreground.is_none())
        }) else {
            return;
        };
        let Some((adapter, pack)) = self.kind_of(&cli) else {
            return;
        };
        if learn_idle
            && !adapter.completes_by_hook()
            && let Ok(fg) = self.mux_of(name).foreground(target).await
        {
            self.sessions().update(name, |e| {
                if e.rt.turn.started.is_none() {
                    // What the pane runs while waiting for input: a quiet pane running anything
                    // else is still working. Kept in the record for the next daemon.
                    e.rec.idle_program = fg.clone();
                    e.rt.idle_foreground = Some(fg);
                }
            });
        }
        match self.mux_of(name).capture(target, None, false).await {
            Ok(screen) => {
                let a = pack.analyze(&screen);
                // A prompt gone from the screen: was someone at the desk? Asked only then.
                let gone = a.prompt.is_none()
                    && self
                        .sessions()
                        .get(name, |e| e.rec.prompt.is_some())
                        .unwrap_or(false);
                if gone {
                    let at = self.mux_of(name).desk_activity(target).await;
                    self.sessions().update(name, |e| e.rt.desk_at = at);
                }
                self.on_screen(name, a);
                self.sessions().update(name, |e| e.rt.last_screen = screen);
            }
            Err(MuxError::NoSuchTarget(_)) | Err(MuxError::NoServer(_)) => {}
            Err(e) => debug!("screen read failed: {e}"),
        }
    }

    /// What the session's CLI and the config make of its turns, for the state machine.
    pub(crate) fn turn_caps(&self, e: &crate::core::Entry) -> Option<crate::turn::Caps> {
        let live = self.live();
        let kind = live.kinds.get(&e.rec.cli)?;
        let d = &self.settings().config.daemon;
        Some(crate::turn::Caps {
            by_hook: kind.adapter.completes_by_hook(),
            start_hook: self.start_hook_live(e),
            confirms_by_screen: self.confirms_by_screen(e),
            awaits_api: self.awaits_api(e),
            api_connected: e.rt.api.is_some(),
            serves_api: kind.adapter.serves_api(),
            quiet: Duration::from_millis(self.cli(&e.rec.cli).map(|c| c.quiet_ms).unwrap_or(1500)),
            idle_end: Duration::from_millis(d.idle_turn_end_ms),
            stall_after: Duration::from_millis(d.stall_after_ms),
        })
    }
}
