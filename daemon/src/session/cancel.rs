//! Stopping a turn without stopping the session, and the input queued behind it: `cancel`
//! interrupts the running turn the CLI's own way (Esc for Claude Code, Ctrl-C for the others,
//! OpenCode's abort API), `queue` shows what waits to be typed, `drop` takes some of it back.

use tracing::info;

use crate::core::*;
use crate::error::CoreError;
use crate::keys::Key;
use crate::model::State;
use crate::store::events::EventKind;

/// What a cancel did.
#[derive(Debug, Clone, PartialEq)]
pub struct Cancelled {
    /// How the CLI was told: "keys Escape", "keys C-c", "api".
    pub how: String,
    /// Inputs still queued (they go next, as after any turn).
    pub queued: usize,
}

impl Daemon {
    /// Interrupts session `name`'s running turn (a prompt it waits on goes with it). `by` is
    /// who asked, for the event.
    pub async fn cancel_turn(&self, name: &str, by: &str) -> Result<Cancelled, CoreError> {
        let (rec, input) = self.lookup(name)?;
        self.refuse_unmanaged(&rec)?;
        if !matches!(rec.state, State::Working | State::Waiting) {
            return Err(CoreError::NothingToCancel {
                name: name.to_string(),
                state: rec.state.as_str().to_string(),
            });
        }
        // The intent first, on disk: a daemon that dies before it records the cancel leaves
        // the next one to report this turn's end as cancelled (see `complete_turn_if`).
        self.sessions().update(name, |e| {
            e.rec.cancel_by = by.to_string();
            e.rt.cancelling = true;
        });
        self.persist();
        let how = self.interrupt(name, &rec, input).await;
        let how = match how {
            Ok(how) => how,
            Err(err) => {
                self.sessions().update(name, |e| {
                    e.rec.cancel_by.clear();
                    e.rt.cancelling = false;
                });
                self.persist();
                return Err(err);
            }
        };
        let queued = self.record_cancel(name, by, &how);
        // A copy of a screen-read turn's output ends with the turn.
        if let Some(f) = self.end_turn_copy(name, &rec.id, rec.target()).await {
            let _ = std::fs::remove_file(f);
        }
        info!(session = name, %how, "turn cancelled");
        self.deliver_queued(name);
        Ok(Cancelled { how, queued })
    }

    /// Interrupts the CLI its own way; how it was told.
    async fn interrupt(
        &self,
        name: &str,
        rec: &crate::model::SessionRecord,
        input: std::sync::Arc<tokio::sync::Mutex<()>>,
    ) -> Result<String, CoreError> {
        let adapter = self.kind_of(&rec.cli).map(|(a, _)| a);
        let api = self
            .sessions()
            .get(name, |e| e.rt.api.clone())
            .flatten()
            .filter(|_| rec.cli_session_id.starts_with("ses_"));
        let how = match api {
            Some(http) => {
                let path = format!("/session/{}/abort", rec.cli_session_id);
                http.post_json(&path, &serde_json::json!({}))
                    .await
                    .map_err(|e| CoreError::CancelNotTaken {
                        name: name.to_string(),
                        why: e.to_string(),
                    })?;
                "api".to_string()
            }
            None => {
                let keys: Vec<&str> = adapter
                    .as_ref()
                    .map(|a| a.cancel_keys())
                    .unwrap_or(&["C-c"])
                    .to_vec();
                let parsed: Vec<Key> = keys
                    .iter()
                    .map(|k| Key::parse(k))
                    .collect::<Result<_, _>>()?;
                let _g = input.lock().await;
                let mux = self.mux_of(name);
                press_apart(mux.as_ref(), rec.target(), &parsed).await?;
                // A TUI may not take the key yet (Gemini CLI ignores Esc for a moment after a
                // request starts): while its screen still says it works, pressed again.
                let pack = self.kind_of(&rec.cli).map(|(_, p)| p);
                if let Some(pack) = pack.filter(|p| p.shows_busy()) {
                    for _ in 0..3 {
                        tokio::time::sleep(std::time::Duration::from_millis(800)).await;
                        let busy = mux
                            .capture(rec.target(), None, false)
                            .await
                            .map(|s| pack.analyze(&s).busy)
                            .unwrap_or(false);
                        if !busy {
                            break;
                        }
                        info!(
                            session = name,
                            "still working after the cancel keys; pressing them again"
                        );
                        press_apart(mux.as_ref(), rec.target(), &parsed).await?;
                    }
                }
                let after: Vec<Key> = adapter
                    .as_ref()
                    .map(|a| a.after_cancel_keys())
                    .unwrap_or(&[])
                    .iter()
                    .map(|k| Key::parse(k))
                    .collect::<Result<_, _>>()?;
                if !after.is_empty() {
                    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
                    mux.send_keys(rec.target(), &after).await?;
                }
                format!("keys {}", keys.join(" "))
            }
        };
        Ok(how)
    }

    /// Records that session `name`'s turn ended by a cancel (`by` asked, `how` the CLI was
    /// told), in one event that also says so for a restart; returns how many inputs wait.
    pub(crate) fn record_cancel(&self, name: &str, by: &str, how: &str) -> usize {
        // The turn is over for clibot: its prompt (and a hook waiting on it) goes, and what
        // is queued goes next.
        let ended = self.sessions().update(name, |e| {
            e.rec.cancel_by.clear();
            e.rt.cancelling = false;
            for (_, (tx, _)) in e.rt.waiters.drain() {
                let _ = tx.send(String::new());
            }
            e.resolve_prompt("cancel");
            e.turn_ended(std::time::Instant::now());
            (e.rec.id.clone(), e.rec.queue.len())
        });
        let Some((id, queued)) = ended else {
            return 0;
        };
        self.event(
            name,
            &id,
            EventKind::TurnCancelled {
                by: by.to_string(),
                how: how.to_string(),
            },
        );
        self.set_state(name, State::Idle, "turn cancelled");
        self.persist();
        queued
    }

    /// The inputs queued behind session `name`'s running turn, oldest first.
    pub fn queued(&self, name: &str) -> Result<Vec<String>, CoreError> {
        let rec = self.get(name)?;
        Ok(rec.queue)
    }

    /// Takes queued input back: the `n`th (from 1), or all with `None`. Returns how many went
    /// and how many are left.
    pub fn drop_queued(&self, name: &str, n: Option<usize>) -> Result<(usize, usize), CoreError> {
        let (id, dropped, left) = self.sessions().try_update(name, |e| {
            let before = e.rec.queue.len();
            match n {
                None => e.rec.queue.clear(),
                Some(i) if i >= 1 && i <= before => {
                    e.rec.queue.remove(i - 1);
                }
                Some(i) => {
                    return Err(CoreError::NoQueuedInput(if before == 0 {
                        format!("nothing is queued for {name}")
                    } else {
                        format!("{name} has {before} queued (1 to {before}), not {i}")
                    }));
                }
            }
            if let Err(err) = self.queues().rewrite(&e.rec.id, &e.rec.queue) {
                tracing::warn!("cannot record the queue on disk: {err}");
            }
            Ok((
                e.rec.id.clone(),
                before - e.rec.queue.len(),
                e.rec.queue.len(),
            ))
        })?;
        if dropped > 0 {
            self.event(
                name,
                &id,
                EventKind::Notice {
                    text: format!(
                        "{dropped} queued input{} dropped; {left} left",
                        if dropped == 1 { "" } else { "s" }
                    ),
                    kind: "queue".into(),
                },
            );
            self.persist();
        }
        Ok((dropped, left))
    }
}

/// Presses `keys` one at a time, a moment apart: a TUI that wants Esc twice (Copilot CLI) reads
/// two that arrive together as one escape sequence.
async fn press_apart(
    mux: &dyn crate::tmux::Mux,
    target: &str,
    keys: &[Key],
) -> Result<(), crate::tmux::MuxError> {
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        mux.send_keys(target, std::slice::from_ref(k)).await?;
    }
    Ok(())
}
