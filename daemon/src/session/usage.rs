//! Counting a turn: once it ended, what it cost is read from its CLI's records (off the async
//! workers, where the CLI keeps them: a jailed session's in its own home), appended to the
//! ledger once, counted in the metrics, and told as a `turn_usage` event.

use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::{Actor, SessionRecord};
use crate::store::events::EventKind;
use crate::usage::PlanWindow;
use crate::usage::ledger::{By, Entry, Row, sum};

/// How often, and how far apart, a turn's records are read until they hold its end.
const RECORD_TRIES: u32 = 15;
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_millis(200);
/// How often a status line's report after the turn is waited for (Claude Code runs it 300 ms
/// after an answer).
const STATUS_TRIES: u32 = 10;

/// A CLI's plan windows as last recorded, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct CliWindows {
    pub cli: String,
    pub windows: Vec<PlanWindow>,
    pub at_ms: i64,
}

impl Daemon {
    /// Counts the turn of `rec` (as it was when the turn ended) that ended as event `seq`.
    pub(crate) fn count_turn(&self, rec: SessionRecord, seq: u64) {
        // A CLI followed through its API (OpenCode) told what the turn cost with its end.
        let told = self
            .sessions()
            .update(&rec.name, |e| e.rt.api_usage.take())
            .flatten();
        let ended = std::time::Instant::now();
        let d = self.clone();
        self.in_background(async move {
            let Some((adapter, _)) = d.kind_of(&rec.cli) else {
                return;
            };
            let cli = d.records_cli(&rec);
            // The CLI may still be writing its records as its hook reports the turn's end:
            // read until they hold the end, for a few seconds at most (then what is there).
            let tries = if told.is_some() { 0 } else { RECORD_TRIES };
            let mut usage = told;
            for _ in 0..tries {
                let (a, r, c) = (adapter.clone(), rec.clone(), cli.clone());
                usage = tokio::task::spawn_blocking(move || a.turn_usage(&r, c.as_ref()))
                    .await
                    .ok()
                    .flatten();
                if usage.as_ref().is_some_and(|u| u.complete) {
                    break;
                }
                tokio::time::sleep(RECORD_WAIT).await;
            }
            // Windows the records do not tell, the CLI's status line may have.
            if let Some(u) = usage.as_mut().filter(|u| u.windows.is_empty()) {
                u.windows = d.status_windows(&rec.name, ended).await;
            }
            let Some(usage) = usage.filter(|u| !u.tokens.is_zero() || !u.windows.is_empty()) else {
                tracing::debug!(cli = %rec.cli, "no usage of the turn in the CLI's records");
                return;
            };
            let usd = d.estimate(adapter.api_key_vars(), cli.as_ref(), &usage);
            let entry = Entry {
                time_ms: crate::store::now_ms(),
                seq,
                session: rec.name.clone(),
                cli: rec.cli.clone(),
                owner: if rec.owner.is_empty() {
                    crate::model::Actor::LOCAL.to_string()
                } else {
                    rec.owner.clone()
                },
                model: usage.model.clone(),
                profile: rec.profile.clone(),
                tokens: usage.tokens,
                calls: usage.calls,
                windows: usage.windows.clone(),
                usd,
            };
            if !d.usage().record(&entry) {
                return;
            }
            d.metrics().turn_usage(&rec.cli, &usage);
            d.event(
                &rec.name,
                &rec.id,
                EventKind::TurnUsage {
                    turn_seq: seq,
                    tokens: usage.tokens,
                    model: usage.model,
                    calls: usage.calls,
                    windows: usage.windows,
                    footer: d.live().config.usage.footer,
                    usd,
                },
            );
            d.check_budgets(&entry);
        });
    }

    /// The plan's windows the CLI's status line told after `ended` (it runs a moment after
    /// each answer): waited for a little while, where a status line reports at all.
    async fn status_windows(&self, name: &str, ended: std::time::Instant) -> Vec<PlanWindow> {
        for _ in 0..STATUS_TRIES {
            let fresh = self
                .sessions()
                .get(name, |e| e.rt.status_at.map(|at| at > ended))
                .flatten();
            // Never reported (no status line of clibot's), or reported since the turn ended.
            if fresh != Some(false) {
                break;
            }
            tokio::time::sleep(RECORD_WAIT).await;
        }
        self.sessions()
            .get(name, |e| e.rt.plan_windows.clone())
            .unwrap_or_default()
    }

    /// What the turn would cost at list price, when money is shown for the session (see
    /// [`crate::usage::prices`]): with an API key set for the session, or always; `None` for a model
    /// nobody priced.
    fn estimate(
        &self,
        key_vars: &[&str],
        cli: Option<&crate::cli::CliSpec>,
        usage: &crate::usage::TurnUsage,
    ) -> Option<f64> {
        use crate::usage::prices::{Money, price_of};
        let config = &self.live().config.usage;
        let priced = match config.money {
            Money::Never => false,
            Money::Always => true,
            Money::Api => key_vars.iter().any(|k| {
                cli.and_then(|c| c.env.get(*k))
                    .is_some_and(|v| !v.trim().is_empty())
                    || std::env::var(k).is_ok_and(|v| !v.trim().is_empty())
            }),
        };
        if !priced {
            return None;
        }
        price_of(&usage.model, &config.prices).map(|p| p.cost(&usage.tokens))
    }

    /// What `actor` may see of the ledger since `since_ms`, summed `by`: admins and the
    /// machine's user every turn, a chat user the turns of sessions they own; only `session`'s
    /// when one is named. With each CLI's plan windows as last recorded (none: its records
    /// tell none).
    pub fn usage_view(
        &self,
        actor: &Actor,
        by: &str,
        since_ms: i64,
        session: &str,
    ) -> Result<(Vec<Row>, Vec<CliWindows>), CoreError> {
        let by = By::parse(by).ok_or_else(|| {
            CoreError::UsageQuery(format!(
                "by: {by:?} is none of session, user, cli, day, model, profile"
            ))
        })?;
        let all = self.is_admin(actor);
        let mine = actor.key();
        let entries: Vec<Entry> = self
            .usage()
            .since(since_ms)
            .into_iter()
            .filter(|e| all || e.owner == mine)
            .filter(|e| session.is_empty() || e.session == session)
            .collect();
        let mut windows: Vec<CliWindows> = Vec::new();
        for e in &entries {
            match windows.iter_mut().find(|w| w.cli == e.cli) {
                Some(w) if !e.windows.is_empty() && e.time_ms >= w.at_ms => {
                    w.windows = e.windows.clone();
                    w.at_ms = e.time_ms;
                }
                Some(_) => {}
                None => windows.push(CliWindows {
                    cli: e.cli.clone(),
                    windows: e.windows.clone(),
                    at_ms: if e.windows.is_empty() { 0 } else { e.time_ms },
                }),
            }
        }
        Ok((sum(&entries, by), windows))
    }
}
