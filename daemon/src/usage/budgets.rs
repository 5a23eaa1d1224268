//! Budgets: how much the turns of a scope (a session, a user, a CLI, or everything) may cost
//! per day, week or month — in tokens, in dollars (the list-price estimate) or in a plan
//! window's percentage — and what happens when they have: a warning at `warn_at`, then at
//! 100 % `hold` (input waits in the queue, scheduled runs too, until an admin lifts it or the
//! period ends), `stop` (the sessions in scope stop, and none starts) or `warn` (told only).
//!
//! Why the state is kept on disk: a budget is told once per period and a hold outlives a
//! restart; `budgets.json` keeps, per budget, the period it is in and what was done in it. A
//! new period starts clean by itself (the period's key changes), so nothing needs to reset it.
//!
//! What this file owns: the configuration (`[[budgets]]`), the pure arithmetic (what a budget
//! has used of the ledger, and in which period), and the table of states behind its own lock.
//! Acting on it — telling the chats, holding input, stopping sessions — is the daemon's
//! (`session/budgets.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::ledger::Entry;

/// `[[budgets]]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    pub name: String,
    /// Scope: one session's turns.
    #[serde(default)]
    pub session: String,
    /// Scope: the turns of one user's sessions ("PLATFORM:USER", or "local").
    #[serde(default)]
    pub user: String,
    /// Scope: one CLI's turns. None of the three: every turn.
    #[serde(default)]
    pub cli: String,
    #[serde(default)]
    pub per: Per,
    /// The limit in tokens (input, output and cache writes; cache reads, billed at a tenth
    /// and re-read on every call of a long conversation, are not counted).
    #[serde(default)]
    pub tokens: Option<u64>,
    /// The limit in dollars, at list price (turns with no price count nothing).
    #[serde(default)]
    pub usd: Option<f64>,
    /// The limit as a plan window's percentage (with `window`, e.g. "5h"); the period is the
    /// window itself.
    #[serde(default)]
    pub plan_percent: Option<f64>,
    #[serde(default)]
    pub window: String,
    /// Told once when this percentage of the limit is used (default 80).
    #[serde(default = "default_warn_at")]
    pub warn_at: f64,
    #[serde(default)]
    pub action: Action,
    /// The time zone the periods begin in (IANA name); default: the machine's.
    #[serde(default)]
    pub tz: String,
}

fn default_warn_at() -> f64 {
    80.0
}

/// How long a budget's period is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    #[default]
    Day,
    Week,
    Month,
}

/// What a budget does at 100 %.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Input waits (queued, scheduled) until an admin lifts it or the period ends.
    #[default]
    Hold,
    /// The sessions in scope stop, and none starts until lifted or the period ends.
    Stop,
    /// Told, nothing more.
    Warn,
}

/// What a budget measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    Tokens(u64),
    Usd(f64),
    Plan { percent: f64, window: String },
}

/// Who a session or a turn is, for a budget's scope.
#[derive(Debug, Clone, Copy)]
pub struct Scoped<'a> {
    pub session: &'a str,
    /// "local" or PLATFORM:USER.
    pub owner: &'a str,
    pub cli: &'a str,
}

impl BudgetSpec {
    /// Whether the spec can work; what to fix otherwise (said at start and reload).
    pub fn check(&self) -> Result<(), String> {
        let at = format!("[[budgets]] {:?}", self.name);
        if self.name.trim().is_empty() {
            return Err("[[budgets]]: each budget needs a name (`name = \"daily\"`)".into());
        }
        let limits = [
            self.tokens.is_some(),
            self.usd.is_some(),
            self.plan_percent.is_some(),
        ];
        if limits.iter().filter(|l| **l).count() != 1 {
            return Err(format!(
                "{at}: give exactly one limit: tokens = N, usd = N or plan_percent = N (with window = \"5h\")"
            ));
        }
        if self.plan_percent.is_some() && self.window.trim().is_empty() {
            return Err(format!(
                "{at}: plan_percent needs the window it is a share of: window = \"5h\" (or \"7d\")"
            ));
        }
        if self.plan_percent.is_some() && self.cli.is_empty() {
            return Err(format!(
                "{at}: a plan window belongs to one CLI's account: add cli = \"claude\" (or the CLI it is)"
            ));
        }
        if [self.usd, self.plan_percent]
            .iter()
            .flatten()
            .any(|v| !v.is_finite() || *v <= 0.0)
            || self.tokens == Some(0)
        {
            return Err(format!("{at}: the limit must be above zero"));
        }
        if !(self.warn_at.is_finite() && self.warn_at > 0.0 && self.warn_at <= 100.0) {
            return Err(format!(
                "{at}: warn_at is a percentage of the limit, from 1 to 100"
            ));
        }
        if !self.tz.is_empty() && jiff::tz::TimeZone::get(&self.tz).is_err() {
            return Err(format!(
                "{at}: tz {:?} is not an IANA time zone (e.g. \"Europe/Paris\")",
                self.tz
            ));
        }
        Ok(())
    }

    pub fn limit(&self) -> Limit {
        match (self.tokens, self.usd, self.plan_percent) {
            (Some(t), _, _) => Limit::Tokens(t),
            (_, Some(u), _) => Limit::Usd(u),
            (_, _, Some(p)) => Limit::Plan {
                percent: p,
                window: self.window.clone(),
            },
            _ => Limit::Tokens(u64::MAX),
        }
    }

    /// Whether `s` is in this budget's scope.
    pub fn covers(&self, s: Scoped<'_>) -> bool {
        (self.session.is_empty() || self.session == s.session)
            && (self.user.is_empty() || self.user == s.owner)
            && (self.cli.is_empty() || self.cli == s.cli)
    }

    /// The scope in words: "session api", "user telegram:42's sessions", "claude", "all".
    pub fn scope_words(&self) -> String {
        let mut parts = Vec::new();
        if !self.session.is_empty() {
            parts.push(format!("session {}", self.session));
        }
        if !self.user.is_empty() {
            parts.push(format!("{}'s sessions", self.user));
        }
        if !self.cli.is_empty() {
            parts.push(self.cli.clone());
        }
        if parts.is_empty() {
            "every session".into()
        } else {
            parts.join(", ")
        }
    }

    fn zone(&self) -> jiff::tz::TimeZone {
        if self.tz.is_empty() {
            jiff::tz::TimeZone::system()
        } else {
            jiff::tz::TimeZone::get(&self.tz).unwrap_or_else(|_| jiff::tz::TimeZone::system())
        }
    }

    /// The calendar period `now_ms` is in: its key ("2026-11-29", the Monday of a week, or
    /// "2026-11") and when it began (ms). Not for plan budgets (their period is the window).
    pub fn period(&self, now_ms: i64) -> (String, i64) {
        let zone = self.zone();
        let Ok(now) = jiff::Timestamp::from_millisecond(now_ms) else {
            return (String::new(), 0);
        };
        let today = now.to_zoned(zone.clone()).date();
        let first = match self.per {
            Per::Day => today,
            Per::Week => today
                .checked_sub(
                    jiff::Span::new().days(i64::from(today.weekday().to_monday_zero_offset())),
                )
                .unwrap_or(today),
            Per::Month => today.first_of_month(),
        };
        let start = first
            .to_zoned(zone)
            .map(|z| z.timestamp().as_millisecond())
            .unwrap_or(0);
        let key = match self.per {
            Per::Month => first.strftime("%Y-%m").to_string(),
            _ => first.to_string(),
        };
        (key, start)
    }

    /// What the budget has used of its limit, from `entries` (the ledger since the period's
    /// start, or for a plan budget its recent turns), and the period's key. `None` for a plan
    /// budget whose CLI has told no such window (yet).
    pub fn used(&self, entries: &[Entry], now_ms: i64) -> Option<Used> {
        let mine = entries.iter().filter(|e| {
            self.covers(Scoped {
                session: &e.session,
                owner: &e.owner,
                cli: &e.cli,
            })
        });
        match self.limit() {
            Limit::Tokens(limit) => {
                let (key, start) = self.period(now_ms);
                let used: u64 = mine
                    .filter(|e| e.time_ms >= start)
                    .map(|e| e.tokens.input + e.tokens.output + e.tokens.cache_write)
                    .sum();
                Some(Used::new(key, used as f64, limit as f64))
            }
            Limit::Usd(limit) => {
                let (key, start) = self.period(now_ms);
                let used: f64 = mine
                    .filter(|e| e.time_ms >= start)
                    .filter_map(|e| e.usd)
                    .sum();
                Some(Used::new(key, used, limit))
            }
            Limit::Plan { percent, window } => {
                let w = mine
                    .flat_map(|e| e.windows.iter().map(move |w| (e.time_ms, w)))
                    .filter(|(_, w)| w.name == window)
                    .max_by_key(|(t, _)| *t)?
                    .1;
                // A window whose reset passed is empty again.
                let used = if w.resets_at_ms > 0 && w.resets_at_ms <= now_ms {
                    0.0
                } else {
                    w.used_percent
                };
                Some(Used::new(
                    format!("{window}@{}", w.resets_at_ms),
                    used,
                    percent,
                ))
            }
        }
    }
}

/// A budget's use in its period.
#[derive(Debug, Clone, PartialEq)]
pub struct Used {
    pub period: String,
    pub used: f64,
    pub limit: f64,
}

impl Used {
    fn new(period: String, used: f64, limit: f64) -> Used {
        Used {
            period,
            used,
            limit,
        }
    }

    pub fn percent(&self) -> f64 {
        if self.limit <= 0.0 {
            100.0
        } else {
            self.used * 100.0 / self.limit
        }
    }
}

/// What was done about a budget in its period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    pub period: String,
    pub warned: bool,
    pub reached: bool,
    /// Who lifted it for the rest of the period (empty: nobody).
    pub lifted_by: String,
    /// The last use seen, for the views.
    pub used: f64,
    pub limit: f64,
}

impl State {
    /// Whether the budget holds back input (or starts) now: reached in the current period
    /// and not lifted.
    pub fn in_force(&self, current_period: &str) -> bool {
        self.reached && self.lifted_by.is_empty() && self.period == current_period
    }
}

/// What crossing a threshold asks the daemon to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Crossed {
    Warn,
    Reached,
}

/// The budgets' states, kept in `budgets.json`.
pub struct Budgets {
    path: PathBuf,
    states: Mutex<BTreeMap<String, State>>,
}

impl Budgets {
    /// Opens the states; a file that does not parse is set aside (a warning), never fatal.
    pub fn open(state_dir: &std::path::Path) -> (Budgets, Option<String>) {
        let path = state_dir.join("budgets.json");
        let (states, warning) = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(s) => (s, None),
                Err(e) => (
                    BTreeMap::new(),
                    Some(format!(
                        "{} does not parse ({e}): budgets start from zero this period; remove the file to silence this",
                        path.display()
                    )),
                ),
            },
            Err(_) => (BTreeMap::new(), None),
        };
        (
            Budgets {
                path,
                states: Mutex::new(states),
            },
            warning,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, State>> {
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, states: &BTreeMap<String, State>) {
        match serde_json::to_vec_pretty(states) {
            Ok(bytes) => {
                if let Err(e) = crate::store::write_atomic(&self.path, &bytes) {
                    tracing::error!(path = %self.path.display(), "cannot keep the budgets' states: {e}");
                }
            }
            Err(e) => tracing::error!("cannot encode the budgets' states: {e}"),
        }
    }

    /// Records budget `name`'s use `u` (a new period starts clean); what it crossed now, once
    /// per period each.
    pub fn observe(&self, spec: &BudgetSpec, u: &Used) -> Vec<Crossed> {
        let mut states = self.lock();
        let s = states.entry(spec.name.clone()).or_default();
        if s.period != u.period {
            *s = State {
                period: u.period.clone(),
                ..State::default()
            };
        }
        s.used = u.used;
        s.limit = u.limit;
        let pct = u.percent();
        let mut crossed = Vec::new();
        if pct >= 100.0 && !s.reached {
            s.reached = true;
            s.warned = true;
            crossed.push(Crossed::Reached);
        } else if pct >= spec.warn_at && !s.warned {
            s.warned = true;
            crossed.push(Crossed::Warn);
        }
        self.save(&states);
        crossed
    }

    /// Lifts budget `name` for the rest of its period; false when it is not in force.
    pub fn lift(&self, name: &str, by: &str) -> bool {
        let mut states = self.lock();
        let Some(s) = states
            .get_mut(name)
            .filter(|s| s.reached && s.lifted_by.is_empty())
        else {
            return false;
        };
        s.lifted_by = by.to_string();
        self.save(&states);
        true
    }

    pub fn state(&self, name: &str) -> State {
        self.lock().get(name).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PlanWindow, Tokens};

    fn spec(toml_text: &str) -> BudgetSpec {
        toml::from_str(toml_text).expect("a budget")
    }

    fn entry(ms: i64, session: &str, cli: &str, tokens: u64) -> Entry {
        Entry {
            time_ms: ms,
            session: session.into(),
            owner: "telegram:7".into(),
            cli: cli.into(),
            tokens: Tokens {
                input: tokens,
                output: 0,
                cache_read: 1_000_000,
                cache_write: 0,
            },
            usd: Some(tokens as f64 / 1000.0),
            ..Entry::default()
        }
    }

    #[test]
    fn a_spec_says_what_is_wrong_with_it() {
        assert!(spec("name = \"a\"\ntokens = 10").check().is_ok());
        for (bad, says) in [
            ("name = \"a\"", "exactly one limit"),
            ("name = \"a\"\ntokens = 1\nusd = 2.0", "exactly one limit"),
            (
                "name = \"a\"\nplan_percent = 90.0\ncli = \"claude\"",
                "window",
            ),
            (
                "name = \"a\"\nplan_percent = 90.0\nwindow = \"5h\"",
                "cli =",
            ),
            ("name = \"a\"\nusd = -1.0", "above zero"),
            ("name = \"a\"\ntokens = 5\nwarn_at = 150.0", "warn_at"),
            ("name = \"a\"\ntokens = 5\ntz = \"Mars/Base\"", "IANA"),
        ] {
            let err = spec(bad).check().expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
        }
        assert!(toml::from_str::<BudgetSpec>("name = \"a\"\ntokens = 1\nper = \"year\"").is_err());
    }

    #[test]
    fn tokens_count_within_the_period_and_the_scope_without_cache_reads() {
        let b = spec("name = \"d\"\ncli = \"claude\"\ntokens = 1000\ntz = \"UTC\"");
        // 2026-11-29T10:00Z and the day before.
        let now = 1_795_946_400_000;
        let day = 86_400_000;
        let entries = [
            entry(now - 1000, "a", "claude", 300),
            entry(now - day, "a", "claude", 5000),
            entry(now - 2000, "b", "codex", 5000),
            entry(now - 3000, "c", "claude", 600),
        ];
        let u = b.used(&entries, now).expect("used");
        assert_eq!(
            (u.period.as_str(), u.used, u.limit),
            ("2026-11-29", 900.0, 1000.0)
        );
        let week = spec("name = \"w\"\nper = \"week\"\ntokens = 1\ntz = \"UTC\"");
        // 2026-11-29 is a Sunday: the week began on Monday the 23rd.
        assert_eq!(week.period(now).0, "2026-11-23");
        let month = spec("name = \"m\"\nper = \"month\"\nusd = 1.0\nsession = \"a\"\ntz = \"UTC\"");
        let u = month.used(&entries, now).expect("used");
        assert_eq!(u.period, "2026-11");
        assert!((u.used - 5.3).abs() < 1e-9, "{u:?}");
    }

    #[test]
    fn a_plan_budget_reads_the_latest_window_and_its_reset() {
        let b = spec("name = \"p\"\ncli = \"codex\"\nplan_percent = 90.0\nwindow = \"5h\"");
        let mut e = entry(100, "a", "codex", 1);
        e.windows = vec![PlanWindow {
            name: "5h".into(),
            used_percent: 95.0,
            resets_at_ms: 10_000,
        }];
        let u = b.used(std::slice::from_ref(&e), 200).expect("told");
        assert!(u.percent() > 100.0);
        assert_eq!(
            b.used(std::slice::from_ref(&e), 20_000).map(|u| u.used),
            Some(0.0)
        );
        assert_eq!(b.used(&[entry(1, "a", "codex", 1)], 2), None);
    }

    #[test]
    fn thresholds_are_crossed_once_per_period_and_a_lift_lasts_the_period() {
        let dir = tempfile::tempdir().expect("dir");
        let (budgets, warning) = Budgets::open(dir.path());
        assert_eq!(warning, None);
        let b = spec("name = \"d\"\ntokens = 100");
        let used = |p: &str, n: f64| Used::new(p.into(), n, 100.0);
        assert_eq!(budgets.observe(&b, &used("1", 50.0)), vec![]);
        assert_eq!(budgets.observe(&b, &used("1", 85.0)), vec![Crossed::Warn]);
        assert_eq!(budgets.observe(&b, &used("1", 90.0)), vec![]);
        assert_eq!(
            budgets.observe(&b, &used("1", 120.0)),
            vec![Crossed::Reached]
        );
        assert!(budgets.state("d").in_force("1"));
        assert!(!budgets.state("d").in_force("2"));
        assert!(budgets.lift("d", "telegram:1"));
        assert!(!budgets.lift("d", "telegram:1"));
        assert!(!budgets.state("d").in_force("1"));
        // Kept across a restart.
        let (again, _) = Budgets::open(dir.path());
        assert_eq!(again.state("d").lifted_by, "telegram:1");
        // A new period starts clean; a jump straight past 100 % warns with the reach.
        assert_eq!(again.observe(&b, &used("2", 150.0)), vec![Crossed::Reached]);
        assert!(again.state("d").in_force("2"));
        std::fs::write(dir.path().join("budgets.json"), "{").expect("write");
        assert!(Budgets::open(dir.path()).1.is_some());
    }
}
