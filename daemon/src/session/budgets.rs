//! Acting on the budgets (see [`crate::usage::budgets`]): each counted turn is weighed against
//! the budgets whose scope it is in; a warning is told once, and at 100 % the budget's action
//! follows — input held in the queue, the sessions stopped, or only told. The chats of the
//! sessions in scope are told, and so are the admins (their notice chats). An admin lifts a
//! budget for the rest of its period; a new period lifts it by itself.

use tracing::{info, warn};

use crate::core::Daemon;
use crate::error::CoreError;
use crate::model::Actor;
use crate::store::events::EventKind;
use crate::usage::budgets::{Action, BudgetSpec, Crossed, Limit, Scoped, State, Used};
use crate::usage::ledger::Entry;

/// How often held queues are looked at again: a period that ends lets them go.
const CLOCK: std::time::Duration = std::time::Duration::from_secs(30);
/// How far back a plan budget looks for its window (the longest window is a week).
const PLAN_LOOKBACK_MS: i64 = 8 * 86_400_000;

/// A budget as the views show it.
#[derive(Debug, Clone)]
pub struct BudgetView {
    pub spec: BudgetSpec,
    pub state: State,
    /// Its use now (`None`: a plan window its CLI has not told).
    pub used: Option<Used>,
    /// It holds input or refuses starts now.
    pub in_force: bool,
}

/// The limit and use in words: "820k of 1.0M tokens", "≈ $4.10 of $5", "92 % of the 5h window".
pub fn budget_amount_words(spec: &BudgetSpec, u: &Used) -> String {
    use clibot_proto::usage_words::{money, tokens};
    match spec.limit() {
        Limit::Tokens(limit) => format!("{} of {} tokens", tokens(u.used as u64), tokens(limit)),
        Limit::Usd(limit) => format!("{} of ${limit:.2} at list price", money(u.used)),
        Limit::Plan { window, .. } => {
            format!(
                "{:.0} % of the {window} window (limit {:.0} %)",
                u.used, u.limit
            )
        }
    }
}

fn period_words(spec: &BudgetSpec) -> &'static str {
    match (spec.limit(), spec.per) {
        (Limit::Plan { .. }, _) => "until the window resets",
        (_, crate::usage::budgets::Per::Day) => "today",
        (_, crate::usage::budgets::Per::Week) => "this week",
        (_, crate::usage::budgets::Per::Month) => "this month",
    }
}

/// For a plan budget, whether its period (`WINDOW@RESET_MS`) is over at `now_ms`.
fn plan_period_over(period: &str, now_ms: i64) -> bool {
    period
        .rsplit_once('@')
        .and_then(|(_, ms)| ms.parse::<i64>().ok())
        .is_some_and(|reset| reset > 0 && reset <= now_ms)
}

impl Daemon {
    fn budget_specs(&self) -> Vec<BudgetSpec> {
        self.live().config.budgets.clone()
    }

    /// What `spec` has used now, from the ledger.
    /// The ledger as far back as any of `specs` needs it, read once for all of them (each
    /// `BudgetSpec::used` keeps its own period).
    fn budget_ledger(&self, specs: &[BudgetSpec], now_ms: i64) -> Vec<Entry> {
        let since = specs
            .iter()
            .map(|spec| match spec.limit() {
                Limit::Plan { .. } => now_ms - PLAN_LOOKBACK_MS,
                _ => spec.period(now_ms).1,
            })
            .min();
        since.map_or_else(Vec::new, |s| self.usage().since(s))
    }

    /// Whether `spec`'s state holds now: reached in the period that is current, not lifted.
    fn budget_in_force(spec: &BudgetSpec, state: &State, now_ms: i64) -> bool {
        if spec.action == Action::Warn {
            return false;
        }
        match spec.limit() {
            Limit::Plan { .. } => {
                state.reached
                    && state.lifted_by.is_empty()
                    && !plan_period_over(&state.period, now_ms)
            }
            _ => state.in_force(&spec.period(now_ms).0),
        }
    }

    /// The budget in force over a session that is `s`, if one is: input to it waits, and no
    /// such session starts.
    pub(crate) fn budget_over(&self, s: Scoped<'_>) -> Option<(BudgetSpec, State)> {
        let now = crate::store::now_ms();
        self.budget_specs().into_iter().find_map(|spec| {
            if !spec.covers(s) {
                return None;
            }
            let state = self.budgets().state(&spec.name);
            Self::budget_in_force(&spec, &state, now).then_some((spec, state))
        })
    }

    /// The hold budget over session `name`, if one holds its input now.
    pub(crate) fn budget_hold(&self, name: &str) -> Option<(BudgetSpec, State)> {
        // Asked before every input: nothing to look up without budgets.
        if self.live().config.budgets.is_empty() {
            return None;
        }
        let (cli, owner) = self
            .sessions()
            .get(name, |e| (e.rec.cli.clone(), e.rec.owner.clone()))?;
        let owner = if owner.is_empty() {
            Actor::LOCAL.to_string()
        } else {
            owner
        };
        self.budget_over(Scoped {
            session: name,
            owner: &owner,
            cli: &cli,
        })
        .filter(|(spec, _)| spec.action == Action::Hold)
    }

    /// Refuses to start a session that a budget in force covers.
    pub(crate) fn refuse_over_budget(&self, s: Scoped<'_>) -> Result<(), CoreError> {
        match self.budget_over(s) {
            Some((spec, state)) => Err(CoreError::OverBudget {
                detail: format!(
                    "{} {}",
                    budget_amount_words(
                        &spec,
                        &Used {
                            period: state.period.clone(),
                            used: state.used,
                            limit: state.limit,
                        }
                    ),
                    period_words(&spec)
                ),
                name: spec.name,
            }),
            None => Ok(()),
        }
    }

    /// The line a held message gets: why it waits and how to lift it.
    pub(crate) fn held_words(spec: &BudgetSpec) -> String {
        format!(
            "💰 budget {} is spent ({}): this message waits in the queue until it ends or an admin lifts it: !!budget lift {}",
            spec.name,
            spec.scope_words(),
            spec.name
        )
    }

    /// Weighs the turn `e` against every budget whose scope it is in.
    pub(crate) fn check_budgets(&self, e: &Entry) {
        let now = crate::store::now_ms();
        let specs: Vec<BudgetSpec> = self
            .budget_specs()
            .into_iter()
            .filter(|spec| {
                spec.covers(Scoped {
                    session: &e.session,
                    owner: &e.owner,
                    cli: &e.cli,
                })
            })
            .collect();
        let ledger = self.budget_ledger(&specs, now);
        for spec in specs {
            let Some(used) = spec.used(&ledger, now) else {
                continue;
            };
            for crossed in self.budgets().observe(&spec, &used) {
                self.budget_crossed(&spec, &used, crossed, &e.session);
            }
        }
    }

    /// Tells the sessions in scope (their chats, and the admins') and acts.
    fn budget_crossed(&self, spec: &BudgetSpec, u: &Used, crossed: Crossed, turn_session: &str) {
        let amount = budget_amount_words(spec, u);
        let when = period_words(spec);
        let text = match (&crossed, spec.action) {
            (Crossed::Warn, _) => format!(
                "💰 budget {}: {:.0} % used ({amount} {when}; {}); at 100 % it {}",
                spec.name,
                u.percent(),
                spec.scope_words(),
                match spec.action {
                    Action::Hold => "holds new input",
                    Action::Stop => "stops the sessions",
                    Action::Warn => "only tells",
                }
            ),
            (Crossed::Reached, Action::Hold) => format!(
                "💰 budget {} is spent ({amount} {when}; {}): new input waits in the queue until the period ends or an admin lifts it: !!budget lift {}",
                spec.name,
                spec.scope_words(),
                spec.name
            ),
            (Crossed::Reached, Action::Stop) => format!(
                "💰 budget {} is spent ({amount} {when}; {}): its sessions stop, and none starts until the period ends or an admin lifts it: !!budget lift {}",
                spec.name,
                spec.scope_words(),
                spec.name
            ),
            (Crossed::Reached, Action::Warn) => format!(
                "💰 budget {} is spent ({amount} {when}; {})",
                spec.name,
                spec.scope_words()
            ),
        };
        info!(budget = %spec.name, ?crossed, "{text}");
        self.audit_log().record(crate::store::audit::Audit::now(
            "clibot",
            "",
            "",
            turn_session,
            "budget",
            "accepted",
            &text,
        ));
        let mut told = self.sessions_in_budget(spec);
        if told.is_empty() || !told.iter().any(|n| n == turn_session) {
            told.push(turn_session.to_string());
        }
        for name in &told {
            let id = self.sessions().id_of(name).unwrap_or_default();
            self.event(
                name,
                &id,
                EventKind::Notice {
                    text: text.clone(),
                    kind: "budget".into(),
                },
            );
        }
        if crossed == Crossed::Reached && spec.action == Action::Stop {
            for name in self.sessions_in_budget(spec) {
                let d = self.clone();
                self.in_background(async move {
                    if let Err(e) = d.stop(&name, false, None).await {
                        warn!(session = %name, "the budget could not stop the session: {e}");
                    }
                });
            }
        }
    }

    /// The live sessions a budget covers.
    fn sessions_in_budget(&self, spec: &BudgetSpec) -> Vec<String> {
        self.sessions().filter_map(|e| {
            if e.rec.state.is_exited() {
                return None;
            }
            let owner = if e.rec.owner.is_empty() {
                Actor::LOCAL
            } else {
                e.rec.owner.as_str()
            };
            spec.covers(Scoped {
                session: &e.rec.name,
                owner,
                cli: &e.rec.cli,
            })
            .then(|| e.rec.name.clone())
        })
    }

    /// Lifts budget `name` for the rest of its period (admins and the machine's user: the
    /// policy table checks it); the held input goes.
    pub fn lift_budget(&self, actor: &Actor, name: &str) -> Result<(), CoreError> {
        let spec = self
            .budget_specs()
            .into_iter()
            .find(|b| b.name == name)
            .ok_or_else(|| CoreError::NoBudgetInForce(name.to_string()))?;
        let now = crate::store::now_ms();
        if !Self::budget_in_force(&spec, &self.budgets().state(name), now)
            || !self.budgets().lift(name, &actor.key())
        {
            return Err(CoreError::NoBudgetInForce(name.to_string()));
        }
        self.audit_log().record(crate::store::audit::Audit::now(
            &actor.user,
            &actor.platform,
            &actor.chat,
            "",
            "budget lift",
            "accepted",
            name,
        ));
        let text = format!(
            "💰 budget {name} lifted by {} for the rest of the period; held input goes now",
            actor.key()
        );
        for session in self.sessions_in_budget(&spec) {
            let id = self.sessions().id_of(&session).unwrap_or_default();
            self.event(
                &session,
                &id,
                EventKind::Notice {
                    text: text.clone(),
                    kind: "budget".into(),
                },
            );
            self.deliver_queued(&session);
        }
        Ok(())
    }

    /// The budgets `actor` may see, with their use now: admins and the machine's user every
    /// one; a chat user those over everyone, a CLI, or their own sessions.
    pub fn budget_views(&self, actor: &Actor) -> Vec<BudgetView> {
        let all = self.is_admin(actor);
        let me = actor.key();
        let now = crate::store::now_ms();
        let specs: Vec<BudgetSpec> = self
            .budget_specs()
            .into_iter()
            .filter(|spec| {
                all || (spec.user.is_empty() || spec.user == me)
                    && (spec.session.is_empty()
                        || self
                            .sessions()
                            .get(&spec.session, |e| e.rec.owner == me)
                            .unwrap_or(false))
            })
            .collect();
        let ledger = self.budget_ledger(&specs, now);
        specs
            .into_iter()
            .map(|spec| {
                let state = self.budgets().state(&spec.name);
                let used = spec.used(&ledger, now);
                let in_force = Self::budget_in_force(&spec, &state, now);
                BudgetView {
                    spec,
                    state,
                    used,
                    in_force,
                }
            })
            .collect()
    }

    /// Lets held queues go once their budget's period ended (no turn runs in a held session,
    /// so no counted turn would tell), until the daemon stops.
    pub async fn budget_clock(&self) {
        let stop = self.shutdown_token().clone();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(CLOCK) => {}
                _ = stop.cancelled() => return,
            }
            if self.budget_specs().is_empty() {
                continue;
            }
            let waiting = self
                .sessions()
                .filter_map(|e| (!e.rec.queue.is_empty()).then(|| e.rec.name.clone()));
            for name in waiting {
                if self.budget_hold(&name).is_none() {
                    self.deliver_queued(&name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_period_ends_at_its_reset() {
        assert!(plan_period_over("5h@100", 100));
        assert!(!plan_period_over("5h@100", 99));
        assert!(!plan_period_over("5h@0", 1_000));
        assert!(!plan_period_over("", 1_000));
    }
}
