//! What time passing means for a session: quiescence ends a hookless CLI's turn, the safety net ends a hook-driven one whose hook never came, stalls, unconfirmed Enters.

use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::core::*;
use crate::keys::Key;
use crate::locking::lock;
use crate::model::{Prompt, State};
use crate::store::events::EventKind;

use super::turn::*;

impl Daemon {
    pub(crate) async fn on_tick(&self, name: &str, target: &str) {
        let now = Instant::now();
        let stall_after = Duration::from_millis(self.inner.settings.config.daemon.stall_after_ms);
        let mut complete_from_screen: Option<(Option<i64>, usize)> = None;
        let mut retry_enter = false;
        let mut publish: Option<Prompt> = None;
        let mut stalled: Option<u64> = None;
        let mut ready = false;
        let mut net = false;
        let idle_end = Duration::from_millis(self.inner.settings.config.daemon.idle_turn_end_ms);
        let id;
        {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = running(&mut sessions, name) else {
                return;
            };
            id = e.rec.id.clone();
            let live = self.live();
            let Some(kind) = live.kinds.get(&e.rec.cli) else {
                return;
            };
            if e.rec.state == State::Working
                && kind.adapter.completes_by_hook()
                && !self.awaits_api(e)
                && e.rt
                    .idle_since
                    .is_some_and(|t| now.duration_since(t) >= idle_end)
                && e.rt
                    .turn_started
                    .is_none_or(|t| now.duration_since(t) >= idle_end)
            {
                net = true;
            }
            let quiet =
                Duration::from_millis(self.cli(&e.rec.cli).map(|c| c.quiet_ms).unwrap_or(1500));
            let silent = now.duration_since(e.rt.last_output);
            let screen_wait = match &e.rec.prompt {
                Some(p) if p.options.is_empty() => HOOK_PROMPT_NO_OPTIONS_WAIT,
                _ => HOOK_PROMPT_SCREEN_WAIT,
            };
            if let Some(since) = e.rt.prompt_pending_since
                && now.duration_since(since) > screen_wait
            {
                e.rt.prompt_pending_since = None;
                publish = e.rec.prompt.clone();
            }
            if let Some(by) = e.rt.confirm_by
                && now > by
            {
                e.rt.confirm_by = None;
                // Confirmed by its start hook or its busy screen, a CLI may be asked a few times;
                // by output, once.
                let tries = if self.start_hook_live(e) || self.confirms_by_screen(e) {
                    3
                } else {
                    1
                };
                if e.rt.confirm_tries < tries {
                    e.rt.confirm_tries += 1;
                    retry_enter = true;
                    if e.rt.confirm_tries < tries {
                        e.rt.confirm_by = Some(now + CONFIRM_AFTER);
                    }
                }
            }
            match e.rec.state {
                // A CLI whose API link gave up falls back to quiescence, like any program.
                State::Working
                    if (!kind.adapter.completes_by_hook()
                        || (kind.adapter.serves_api() && !self.awaits_api(e)))
                        && e.rt
                            .turn_started
                            .is_some_and(|t| now.duration_since(t) >= quiet)
                        && silent >= quiet =>
                {
                    complete_from_screen = Some((e.rt.anchor.take(), e.rt.input_lines));
                    e.rt.turn_started = None;
                }
                State::Starting
                    if silent >= STARTUP_QUIET && (!self.awaits_api(e) || e.rt.api.is_some()) =>
                {
                    ready = true
                }
                _ => {}
            }
            if e.rec.state == State::Working && silent >= stall_after && !e.rec.stalled {
                e.rec.stalled = true;
                stalled = Some(silent.as_millis() as u64);
            }
        }
        if let Some(p) = publish {
            self.event(name, &id, EventKind::Waiting { prompt: p });
        }
        if let Some(ms) = stalled {
            warn!(silent_ms = ms, "no output for a long time");
            self.event(name, &id, EventKind::Stalled { silent_ms: ms });
        }
        if retry_enter {
            info!("no visible change after Enter; pressing Enter once more");
            let input = lock(&self.inner.sessions)
                .get(name)
                .map(|e| e.input.clone());
            if let Some(input) = input {
                let _g = input.lock().await;
                let _ = self
                    .inner
                    .mux
                    .send_keys(target, &[Key::Named("Enter".into())])
                    .await;
            }
        }
        if ready {
            self.set_state(name, State::Idle, "ready");
            self.deliver_queued(name);
        }
        if net {
            self.end_idle_turn(name, target, idle_end).await;
        }
        if let Some((anchor, input_lines)) = complete_from_screen {
            // Quiet, but is a command still running in the foreground (a shell's `sleep 10`)?
            let fg = self.inner.mux.foreground(target).await.ok();
            let still_running = {
                let mut sessions = lock(&self.inner.sessions);
                match sessions.get_mut(name) {
                    Some(e) => match (&e.rt.idle_foreground, &fg) {
                        (Some(idle), Some(now)) if idle != now => {
                            // Not over: put the turn back and look again later.
                            e.rt.turn_started = Some(Instant::now());
                            e.rt.anchor = anchor;
                            true
                        }
                        _ => false,
                    },
                    None => return,
                }
            };
            if still_running {
                return;
            }
            let text = match (anchor, self.inner.mux.cursor(target).await) {
                (Some(a), Ok((hist, _))) => self
                    .inner
                    .mux
                    .capture(target, Some(a - hist), false)
                    .await
                    .ok(),
                _ => self.inner.mux.capture(target, None, false).await.ok(),
            }
            .map(|c| reply_from_screen(&c, input_lines))
            .unwrap_or_default();
            self.complete_turn(name, text, "screen");
        }
    }

    /// The safety net: the screen of a working hook-driven CLI has looked idle for `idle_end`
    /// and no completion hook came (lost, or never sent). Looked at once more; if it still
    /// looks idle, the turn ends with the reply from the CLI's transcript (when it keeps one
    /// and it holds a new reply), and the next queued input goes.
    pub(crate) async fn end_idle_turn(&self, name: &str, target: &str, idle_end: Duration) {
        let Some((cli, pack)) = lock(&self.inner.sessions).get(name).and_then(|e| {
            self.kind_of(&e.rec.cli)
                .map(|(_, p)| (e.rec.cli.clone(), p))
        }) else {
            return;
        };
        let Ok(screen) = self.inner.mux.capture(target, None, false).await else {
            return;
        };
        let a = pack.analyze(&screen);
        let rec = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = running(&mut sessions, name) else {
                return;
            };
            if !(a.settled && a.prompt.is_none())
                || e.rec.state != State::Working
                || e.rec.prompt.is_some()
            {
                e.rt.idle_since = None;
                return;
            }
            e.rec.clone()
        };
        let reply = self
            .kind_of(&cli)
            .and_then(|(ad, _)| ad.recover_reply(&rec, self.cli(&cli).ok().as_deref()))
            .filter(|r| rec.last_reply.as_ref() != Some(r))
            .unwrap_or_default();
        warn!(
            idle_ms = idle_end.as_millis() as u64,
            "the CLI looks idle but its completion hook never came; ending the turn"
        );
        self.complete_turn(name, reply, "idle");
        if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
            e.rt.net_closed = true;
        }
    }

    /// Records a finished turn and moves on to the next queued input.
    pub(crate) fn complete_turn(&self, name: &str, text: String, source: &str) {
        let id = {
            let mut sessions = lock(&self.inner.sessions);
            let Some(e) = sessions.get_mut(name) else {
                return;
            };
            e.rt.turn_started = None;
            e.rt.idle_since = None;
            e.rt.net_closed = false;
            e.rt.recovered = false;
            e.rec.turn_anchor = None;
            e.rec.turn_input_lines = 0;
            e.rec.turn_started_ms = 0;
            e.rt.last_completed = Some(Instant::now());
            e.rt.confirm_by = None;
            e.rec.stalled = false;
            if let Some(p) = e.rec.prompt.take() {
                remember_resolved(&mut e.rt.resolved, &p.id, "cli");
            }
            self.inner.metrics.turn_completed(name, &e.rec.cli);
            e.rec.id.clone()
        };
        let ev = self.event_full(
            name,
            &id,
            EventKind::TurnCompleted {
                text,
                source: source.to_string(),
                blob_id: String::new(),
                full_bytes: 0,
            },
        );
        if let EventKind::TurnCompleted {
            text,
            blob_id,
            full_bytes,
            ..
        } = ev.kind
        {
            let long = !blob_id.is_empty();
            if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
                e.rec.last_reply = Some(text);
                e.rec.last_reply_seq = ev.seq;
                e.rec.last_reply_blob = blob_id;
                e.rec.last_reply_bytes = full_bytes;
            }
            if long {
                self.expire_blobs();
            }
        }
        info!(source, "turn completed");
        let reason = if source == "idle" {
            "turn ended: the CLI looked idle and no completion hook came"
        } else {
            "turn completed"
        };
        self.set_state(name, State::Idle, reason);
        self.persist();
        self.deliver_queued(name);
    }
}
