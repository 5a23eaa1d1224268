//! What time passing means for a session: quiescence ends a hookless CLI's turn, the safety net ends a hook-driven one whose hook never came, stalls, unconfirmed Enters.

use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::core::*;
use crate::keys::Key;
use crate::model::{State, TurnEnd};
use crate::store::events::EventKind;

impl Daemon {
    pub(crate) async fn on_tick(&self, name: &str, target: &str) {
        let now = Instant::now();
        let idle_end = Duration::from_millis(self.settings().config.daemon.idle_turn_end_ms);
        let ticked = self.sessions().update_running(name, |e| {
            let caps = self.turn_caps(e)?;
            let facts = crate::turn::Facts {
                state: e.rec.state,
                stalled: e.rec.stalled,
                prompt: e.rec.prompt.as_ref().map(|p| !p.options.is_empty()),
            };
            let out = e.rt.turn.tick(&facts, &caps, now);
            if out.stalled.is_some() {
                e.rec.stalled = true;
            }
            let publish = out.publish_prompt.then(|| e.rec.prompt.clone()).flatten();
            Some((e.rec.id.clone(), out, publish))
        });
        let Some((id, out, publish)) = ticked.flatten() else {
            return;
        };
        let crate::turn::TickOutcome {
            stalled,
            retry_enter,
            ready,
            net,
            complete_from_screen,
            ..
        } = out;
        if let Some(p) = publish {
            self.event(name, &id, EventKind::Waiting { prompt: p });
        }
        if let Some(ms) = stalled {
            warn!(silent_ms = ms, "no output for a long time");
            let working_ms = self
                .working_for(name)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0);
            let screen = self.screen_tail(name, target).await;
            self.event(
                name,
                &id,
                EventKind::Stalled {
                    silent_ms: ms,
                    working_ms,
                    screen,
                },
            );
        }
        self.check_turn_timeout(name, target).await;
        if retry_enter {
            info!("no visible change after Enter; pressing Enter once more");
            let input = self.sessions().input_lock(name);
            let cli = self.sessions().cli_of(name).unwrap_or_default();
            if let Some(input) = input {
                let _g = input.lock().await;
                // Never an Enter into a dialog that came up meanwhile: it would answer it.
                if !self.dialog_up(name, target, &cli).await {
                    let _ = self
                        .mux_of(name)
                        .send_keys(target, &[Key::Named("Enter".into())])
                        .await;
                }
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
            let fg = self.mux_of(name).foreground(target).await.ok();
            let still_running = self.sessions().update(name, |e| {
                // The CLI's own program in the foreground is the CLI at rest, whatever was
                // learned (a read taken while its launcher was still starting it names the
                // launcher): the record is corrected.
                let program = self.cli(&e.rec.cli).ok().and_then(|c| c.program_name());
                match (&e.rt.idle_foreground, &fg) {
                    (Some(idle), Some(now)) if idle != now && program.as_ref() == Some(now) => {
                        e.rec.idle_program = now.clone();
                        e.rt.idle_foreground = Some(now.clone());
                        false
                    }
                    (Some(idle), Some(now)) if idle != now => {
                        // Not over: put the turn back and look again later.
                        e.rt.turn.still_running(Instant::now(), anchor);
                        true
                    }
                    _ => false,
                }
            });
            // Gone meanwhile, or not over.
            if still_running.unwrap_or(true) {
                return;
            }
            let text = self.screen_reply(name, target, anchor, input_lines).await;
            self.complete_turn(name, text, TurnEnd::Screen);
        }
    }

    /// The safety net: the screen of a working hook-driven CLI has looked idle for `idle_end`
    /// and no completion hook came (lost, or never sent). Looked at once more; if it still
    /// looks idle, the turn ends with the reply from the CLI's transcript (when it keeps one
    /// and it holds a new reply), and the next queued input goes.
    async fn end_idle_turn(&self, name: &str, target: &str, idle_end: Duration) {
        let kind = self.sessions().get(name, |e| {
            self.kind_of(&e.rec.cli)
                .map(|(_, p)| (e.rec.cli.clone(), p))
        });
        let Some((cli, pack)) = kind.flatten() else {
            return;
        };
        let Ok(screen) = self.mux_of(name).capture(target, None, false).await else {
            return;
        };
        let a = pack.analyze(&screen);
        let rec = self.sessions().update_running(name, |e| {
            if !(a.settled && a.prompt.is_none())
                || e.rec.state != State::Working
                || e.rec.prompt.is_some()
            {
                e.rt.turn.not_idle();
                return None;
            }
            Some(e.rec.clone())
        });
        let Some(rec) = rec.flatten() else {
            return;
        };
        // A turn cancelled or failed may end without its completion signal by design (Copilot
        // CLI's): only one whose screen shows neither is a detection failure.
        if !a.interrupted && a.error.is_none() {
            self.metrics()
                .detection_failure(&cli, &rec.cli_version, "no_completion");
        }
        let reply = self
            .recovered_reply(&rec)
            .await
            .filter(|r| rec.last_reply.as_ref() != Some(r))
            .unwrap_or_default();
        warn!(
            idle_ms = idle_end.as_millis() as u64,
            "the CLI looks idle but its completion hook never came; ending the turn"
        );
        self.complete_turn(name, reply, TurnEnd::Idle);
        self.sessions().update(name, |e| e.rt.turn.net_ended());
    }

    /// Records a finished turn and moves on to the next queued input.
    pub(crate) fn complete_turn(&self, name: &str, text: String, source: TurnEnd) {
        self.complete_turn_if(name, text, source, false);
    }

    /// Completes the turn only if it still runs in this daemon's view: for a CLI whose API
    /// reports a turn's end on two paths (its event stream, and the catch-up after a reconnect
    /// or a daemon restart), which may race — whichever comes second finds it ended and does
    /// nothing. The check and the mark are made under one lock.
    pub(crate) fn complete_turn_once(&self, name: &str, text: String, source: TurnEnd) {
        self.complete_turn_if(name, text, source, true);
    }

    fn complete_turn_if(&self, name: &str, text: String, source: TurnEnd, once: bool) {
        // A daemon shutting down has saved its sessions for the last time, the turn still
        // running: recorded now, it would be reported again by the next daemon, which finds
        // it running and sees it ended. Left to that daemon, it is reported once.
        if self.shutdown_token().is_cancelled() {
            info!(
                source = source.as_str(),
                "a turn ended while the daemon stops: the next daemon reports it"
            );
            return;
        }
        let cancel_by = self
            .sessions()
            .get(name, |e| (e.rt.cancelling, e.rec.cancel_by.clone()));
        match cancel_by {
            // This daemon's cancel is interrupting the turn: it reports the end.
            Some((true, _)) => {
                info!(
                    source = source.as_str(),
                    "a turn ended by the cancel under way"
                );
                return;
            }
            // A cancel the last daemon began and did not record: the turn ended by it.
            Some((false, by)) if !by.is_empty() => {
                info!(
                    source = source.as_str(),
                    "the turn a cancel interrupted before a restart ended"
                );
                self.record_cancel(name, &by, "before the daemon restarted");
                self.deliver_queued(name);
                return;
            }
            _ => {}
        }
        let ended = self.sessions().update(name, |e| {
            if once && e.rt.turn.started.is_none() {
                return None;
            }
            // As it was during the turn: its records are found by when the turn began.
            let during = e.rec.clone();
            e.turn_ended(Instant::now());
            e.resolve_prompt("cli");
            self.metrics().turn_completed(name, &e.rec.cli);
            Some(during)
        });
        let Some(during) = ended.flatten() else {
            return;
        };
        let id = during.id.clone();
        let ev = self.event_full(
            name,
            &id,
            EventKind::TurnCompleted {
                text,
                source,
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
            self.sessions().update(name, |e| {
                e.rec.last_reply = Some(text);
                e.rec.last_reply_seq = ev.seq;
                e.rec.last_reply_blob = blob_id;
                e.rec.last_reply_bytes = full_bytes;
            });
            if long {
                self.expire_blobs();
            }
        }
        self.count_turn(during, ev.seq);
        info!(source = source.as_str(), "turn completed");
        let reason = if source == TurnEnd::Idle {
            "turn ended: the CLI looked idle and no completion hook came"
        } else {
            "turn completed"
        };
        self.set_state(name, State::Idle, reason);
        self.persist();
        self.deliver_queued(name);
    }
}
