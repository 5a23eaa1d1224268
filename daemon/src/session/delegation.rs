//! Handing a session's work to another CLI: the new session, the handoff typed into it, the chats moved over.

use crate::automation::delegation::*;
use crate::core::bus::Subscriber;
use crate::core::{Daemon, SpawnRequest};
use crate::error::CoreError;
use crate::model::SessionRecord;
use crate::store::events::EventKind;
use std::time::Instant;
use tracing::{info, warn};

/// Delegation, on the bus: an error or a stall recorded may hand the session's work to the
/// next CLI of its chain.
pub(crate) struct Delegation;

impl Subscriber for Delegation {
    fn name(&self) -> &'static str {
        "delegation"
    }

    fn on_event(&self, daemon: &Daemon, event: &crate::store::events::Event) {
        match &event.kind {
            EventKind::Error { kind, message } => {
                daemon.consider_delegation(&event.session, kind, message)
            }
            EventKind::Stalled { silent_ms, .. } => daemon.consider_delegation(
                &event.session,
                "stalled",
                &format!(
                    "no output for {}",
                    crate::duration::format_duration(std::time::Duration::from_millis(*silent_ms))
                ),
            ),
            _ => {}
        }
    }
}

impl Daemon {
    /// An event that may hand a session's work on: an error of kind `kind`, `crash` (its CLI
    /// exited mid-turn) or `stalled`. Acts only for sessions that delegate and have not yet
    /// handed on, when a chain covers the kind; runs in its own task.
    pub(crate) fn consider_delegation(&self, name: &str, kind: &str, detail: &str) {
        let since = Instant::now();
        let live = self.live();
        if live.config.delegation.chain_for(kind).is_none() {
            return;
        }
        let wanted = self
            .sessions()
            .get(name, |e| {
                e.rec.delegate && e.rec.delegated_to.is_empty() && !e.stopping
            })
            .unwrap_or(false);
        if !wanted {
            return;
        }
        let d = self.clone();
        let (name, kind, detail) = (name.to_string(), kind.to_string(), detail.to_string());
        self.in_background(async move {
            if let Err(e) = d.delegate_since(&name, None, &kind, &detail, since).await {
                warn!(session = %name, "no delegation: {e}");
                d.notice(&name, "delegation", &format!("{}; the work stays here", e));
            }
        });
    }

    /// Hands session `name`'s work to CLI `to` (or along the chain for `reason`): starts
    /// it, types the last request with a handoff, moves the chats. `reason` is the error kind
    /// or "manual" (then `detail` says who). Returns the new session.
    pub async fn delegate(
        &self,
        name: &str,
        to: Option<&str>,
        reason: &str,
        detail: &str,
    ) -> Result<SessionRecord, CoreError> {
        self.delegate_since(name, to, reason, detail, Instant::now())
            .await
    }

    /// [`Daemon::delegate`], timed from `since` (when the CLI failed). A CLI of the chain that
    /// cannot start is passed over for the next one (and the notice says so); a CLI named by
    /// hand is the only one tried.
    async fn delegate_since(
        &self,
        name: &str,
        to: Option<&str>,
        reason: &str,
        detail: &str,
        since: Instant,
    ) -> Result<SessionRecord, CoreError> {
        let live = self.live();
        let cfg = &live.config.delegation;
        // A transaction: the name the work goes to is reserved in the session's record as it
        // is found free among all the others, so that a second error cannot start a second
        // delegation nor take the same name.
        let (old, candidates) = self.sessions().transaction(|sessions| {
            let e = sessions
                .get(name)
                .ok_or_else(|| CoreError::NoSuchSession(name.to_string()))?;
            if !e.rec.delegated_to.is_empty() {
                return Err(CoreError::Delegation(format!(
                    "session {name} already handed its work to {}",
                    e.rec.delegated_to
                )));
            }
            let mut visited = e.rec.delegated_from.clone();
            visited.push(e.rec.cli.clone());
            let candidates = match to {
                Some(t) => {
                    self.cli(t)?;
                    if t == e.rec.cli {
                        return Err(CoreError::Delegation(format!(
                            "session {name} already runs {t}; name another CLI"
                        )));
                    }
                    vec![t.to_string()]
                }
                None => {
                    // By hand without a CLI: the default chain, bounded by every hop so far.
                    let (chain, hops) = match cfg.chain_for(reason) {
                        Some(c) => {
                            let hops = c.hops(&e.rec.delegated_reasons);
                            (c, hops)
                        }
                        None if reason == "manual" => {
                            (cfg.default_chain(), e.rec.delegated_from.len() as u32)
                        }
                        None => {
                            return Err(CoreError::Delegation(format!(
                                "no chain hands on {reason}: neither [delegation.chains.{reason}] nor [delegation] on lists it"
                            )));
                        }
                    };
                    if hops >= chain.max_attempts {
                        return Err(CoreError::Delegation(format!(
                            "this work was already handed on {hops} time(s), the most {} max_attempts allows",
                            chain.key
                        )));
                    }
                    let c = chain.candidates(&visited, |c| self.cli(c).is_ok());
                    if c.is_empty() {
                        return Err(CoreError::Delegation(format!(
                            "no CLI left to hand the work to: {} already tried, {} to = {:?}",
                            visited.join(", "),
                            chain.key,
                            chain.to
                        )));
                    }
                    c
                }
            };
            let old = e.rec.clone();
            // Reserved now, so that a second error cannot start a second delegation.
            let first = free_name(sessions, name, &candidates[0]);
            if let Some(e) = sessions.get_mut(name) {
                e.rec.delegated_to = first;
            }
            Ok::<_, CoreError>((old, candidates))
        })?;
        let mut visited = old.delegated_from.clone();
        visited.push(old.cli.clone());
        let mut reasons = old.delegated_reasons.clone();
        reasons.resize(old.delegated_from.len(), String::new());
        reasons.push(reason.to_string());
        let mut skipped: Vec<String> = Vec::new();
        let mut started = None;
        for target in candidates {
            // A transaction, as above: the next free name, reserved as it is found.
            let new_name = self.sessions().transaction(|sessions| {
                let n = free_name(sessions, name, &target);
                if let Some(e) = sessions.get_mut(name) {
                    e.rec.delegated_to = n.clone();
                }
                n
            });
            let spawned = self
                .spawn(SpawnRequest {
                    name: new_name.clone(),
                    cli: target.clone(),
                    dir: old.dir.to_string_lossy().into_owned(),
                    owner: old.owner.clone(),
                    delegate: old.delegate,
                    delegated_from: visited.clone(),
                    delegated_reasons: reasons.clone(),
                    ..Default::default()
                })
                .await;
            match spawned {
                Ok(r) if !r.state.is_exited() => {
                    started = Some((target, new_name, r));
                    break;
                }
                Ok(r) => {
                    let why = format!("{target} exited as it started ({})", r.exit_reason.trim());
                    warn!(session = %name, "{why}");
                    skipped.push(why);
                }
                Err(e) if to.is_some() => {
                    skipped.push(format!("could not start {target} to continue: {e}"));
                }
                Err(e) => {
                    let why = could_not_start(&target, &e);
                    warn!(session = %name, "{why}: {e}");
                    skipped.push(why);
                }
            }
        }
        let Some((target, new_name, new)) = started else {
            self.sessions().update(name, |e| e.rec.delegated_to.clear());
            return Err(CoreError::Delegation(match to {
                Some(_) => skipped.join("; "),
                None => format!(
                    "no CLI of the chain could take the work: {}",
                    skipped.join("; ")
                ),
            }));
        };
        self.sessions()
            .update(&new_name, |e| e.rec.shared_with = old.shared_with.clone());
        let line = why(&old.cli, reason, detail);
        info!(session = %name, to = %new_name, reason, ?skipped, "handing the work on");
        let moved = self.chats().move_session(name, &new_name);
        self.event(
            name,
            &old.id,
            EventKind::Delegated {
                to_session: new_name.clone(),
                to_cli: target.clone(),
                reason: reason.to_string(),
                detail: detail.to_string(),
                attempt: visited.len() as u32,
                skipped: skipped.clone(),
            },
        );
        let mut notice = line;
        for s in &skipped {
            notice.push_str(&format!("; {s}"));
        }
        self.notice(
            &new_name,
            "delegation",
            &format!("{notice}; continuing in {new_name} ({target})"),
        );
        self.metrics()
            .delegated(&old.cli, &target, reason, &new_name, since);
        if let Err(e) = self.type_handoff(&new_name, &old, reason, detail).await {
            warn!(session = %new_name, "the handoff could not be typed: {e}");
            self.notice(
                &new_name,
                "delegation",
                &format!("the handoff could not be typed ({e}); send the request again"),
            );
        }
        let mut audit = format!(
            "to {new_name} ({target}): {reason}; {} chat(s) moved",
            moved.len()
        );
        if !skipped.is_empty() {
            audit.push_str(&format!("; passed over: {}", skipped.join("; ")));
        }
        self.audit_log().record(crate::store::audit::Audit::now(
            "clibot", "clibot", "", name, "delegate", "accepted", &audit,
        ));
        self.persist();
        Ok(self.sessions().record(&new_name).unwrap_or(new))
    }

    /// Types into session `to` the handoff of `old`'s work (see [`handoff_text`]): what
    /// stopped it, its last reply, `git status` of its directory, and its last request.
    pub(crate) async fn type_handoff(
        &self,
        to: &str,
        old: &SessionRecord,
        reason: &str,
        detail: &str,
    ) -> Result<(), CoreError> {
        // git runs only where no jail can change the repository under it (its config names
        // programs git runs, and a jailed session could add one between any check and the run).
        let status = if old.jail_home.is_empty() {
            git_status(&old.dir).await
        } else {
            None
        };
        let handoff = handoff_text(old, reason, detail, &status);
        self.send_input(to, &handoff, true).await.map(drop)
    }

    /// A line for the session's chats.
    pub(crate) fn notice(&self, name: &str, kind: &str, text: &str) {
        let id = self.sessions().id_of(name).unwrap_or_default();
        self.event(
            name,
            &id,
            EventKind::Notice {
                text: text.to_string(),
                kind: kind.to_string(),
            },
        );
    }
}

/// Why a CLI of the chain was passed over, in a few words: a missing program is named, not
/// the whole search path.
fn could_not_start(cli: &str, e: &CoreError) -> String {
    match e {
        CoreError::ProgramNotFound { program, .. } => {
            format!("{cli} could not start (its program {program:?} was not found)")
        }
        CoreError::ProgramNotExecutable { program, .. } => format!(
            "{cli} could not start ({} is not an executable file)",
            program.display()
        ),
        e => format!("{cli} could not start ({e})"),
    }
}
