//! Delegation: when a session's CLI cannot go on (its usage limit, a rate limit, a lost login,
//! a stall) the work moves to another CLI, so that a task left running at night does not wait
//! for the morning.
//!
//! The next CLI starts as `NAME-CLI` in the same directory; the request that failed is typed
//! there with a short handoff (what the first CLI last said, `git status --short`), the chats
//! bound to the first session move to the new one and are told. The first session is left as it
//! is, for inspection. A chain never visits a CLI twice and is bounded by `max_attempts`.
//!
//! Each failure class may have a chain of its own (`[delegation.chains.KIND]`: its order and
//! its bound); the flat keys are the default chain for the kinds in `on`. A CLI of the chain
//! that cannot start is passed over for the next.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::cli::CliSpec;
use crate::model::SessionRecord;

/// `[delegation]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DelegationConfig {
    /// Error kinds (from the CLIs' pattern packs and hooks: `usage_limit`, `rate_limit`,
    /// `auth`, `network`, ...), `crash` and `stalled` that hand the work on along the default
    /// chain (`to`, `max_attempts`). A kind with a chain of its own follows that one.
    pub on: Vec<String>,
    /// The default chain: the CLIs to continue in, tried in order (one not yet used by the
    /// work).
    pub to: Vec<String>,
    /// How many hops the default chain may make for one piece of work.
    pub max_attempts: u32,
    /// Every new session delegates (without `--delegate`).
    pub default: bool,
    /// `[delegation.chains.KIND]`: a chain of its own for one failure class.
    pub chains: BTreeMap<String, ChainConfig>,
}

/// `[delegation.chains.KIND]`: where the work goes when its CLI fails with KIND.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// The CLIs to continue in, tried in order.
    pub to: Vec<String>,
    /// How many hops this chain may make for one piece of work; default `[delegation]
    /// max_attempts`.
    pub max_attempts: Option<u32>,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        DelegationConfig {
            on: vec!["usage_limit".into(), "rate_limit".into(), "auth".into()],
            to: Vec::new(),
            max_attempts: 2,
            default: false,
            chains: BTreeMap::new(),
        }
    }
}

/// The name a failure class is counted and looked up by: `timeout` is another name for
/// `stalled` (no output for `stall_after_ms` while working).
pub fn canonical_kind(kind: &str) -> &str {
    match kind.trim() {
        "timeout" => "stalled",
        k => k,
    }
}

/// One chain as it applies to a failure: the config key it comes from, its order, its bound,
/// and the failure classes whose hops count against that bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain<'a> {
    /// `[delegation]` or `[delegation.chains.KIND]`: what a message names.
    pub key: String,
    pub to: &'a [String],
    pub max_attempts: u32,
    /// The kinds this chain hands on (canonical); empty for the default chain taken by hand.
    kinds: Vec<String>,
}

impl<'a> Chain<'a> {
    /// The hops this chain already made for the work: the reasons of the hops so far (one per
    /// CLI the work left), counted when they are this chain's kinds.
    pub fn hops(&self, reasons: &[String]) -> u32 {
        reasons
            .iter()
            .filter(|r| self.kinds.iter().any(|k| k == canonical_kind(r)))
            .count() as u32
    }

    /// The CLIs to try, in order: those of the chain the work has not visited (`visited`:
    /// every CLI it ran in, the current one last) and that are configured now.
    pub fn candidates(&self, visited: &[String], configured: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in self.to {
            if !visited.contains(c) && !out.contains(c) && configured(c) {
                out.push(c.clone());
            }
        }
        out
    }
}

impl DelegationConfig {
    /// The chain a failure of `kind` follows: its own, else the default one when `on` lists
    /// it and `to` names a CLI; `None`: the work stays.
    pub fn chain_for(&self, kind: &str) -> Option<Chain<'_>> {
        let kind = canonical_kind(kind);
        if kind.is_empty() || kind == "manual" {
            return None;
        }
        if let Some((name, c)) = self.chains.iter().find(|(k, _)| canonical_kind(k) == kind) {
            return Some(Chain {
                key: format!("[delegation.chains.{name}]"),
                to: &c.to,
                max_attempts: c.max_attempts.unwrap_or(self.max_attempts),
                kinds: vec![kind.to_string()],
            });
        }
        let listed = self.on.iter().any(|k| canonical_kind(k) == kind);
        (listed && !self.to.is_empty()).then(|| self.default_chain())
    }

    /// `[delegation] on`, `to` and `max_attempts`: the kinds of `on` without a chain of their
    /// own.
    pub fn default_chain(&self) -> Chain<'_> {
        let own: Vec<&str> = self.chains.keys().map(|k| canonical_kind(k)).collect();
        Chain {
            key: "[delegation]".into(),
            to: &self.to,
            max_attempts: self.max_attempts,
            kinds: self
                .on
                .iter()
                .map(|k| canonical_kind(k).to_string())
                .filter(|k| !own.contains(&k.as_str()))
                .collect(),
        }
    }

    /// Names the key that is wrong.
    pub fn validate(&self, clis: &BTreeMap<String, CliSpec>) -> Result<(), String> {
        let known = || clis.keys().cloned().collect::<Vec<_>>().join(", ");
        for c in &self.to {
            if !clis.contains_key(c) {
                return Err(format!(
                    "[delegation] to: {c:?} is not a configured CLI (known: {})",
                    known()
                ));
            }
        }
        if self.max_attempts == 0 {
            return Err("[delegation] max_attempts must be at least 1 (the default is 2)".into());
        }
        if self.on.iter().any(|k| k.trim().is_empty()) {
            return Err("[delegation] on: an error kind is empty".into());
        }
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, chain) in &self.chains {
            let key = format!("[delegation.chains.{name}]");
            let kind = canonical_kind(name);
            if kind.is_empty() {
                return Err(format!("{key}: the error kind is empty"));
            }
            if kind == "manual" {
                return Err(format!(
                    "{key}: \"manual\" is not an error kind (a hand-on by a person names its CLI, or takes [delegation] to)"
                ));
            }
            if let Some(other) = seen.insert(kind, name) {
                return Err(format!(
                    "{key}: the same failure class as [delegation.chains.{other}] (timeout is another name for stalled); keep one"
                ));
            }
            if chain.to.is_empty() {
                return Err(format!(
                    "{key} to: name at least one CLI to continue in (to keep the work where it is on {name}, leave the chain out and {name} out of [delegation] on)"
                ));
            }
            for c in &chain.to {
                if !clis.contains_key(c) {
                    return Err(format!(
                        "{key} to: {c:?} is not a configured CLI (known: {})",
                        known()
                    ));
                }
            }
            if chain.max_attempts == Some(0) {
                return Err(format!(
                    "{key} max_attempts must be at least 1 (without it, [delegation] max_attempts applies)"
                ));
            }
        }
        Ok(())
    }
}

/// "claude hit its usage limit".
pub(crate) fn why(cli: &str, reason: &str, detail: &str) -> String {
    match reason {
        "usage_limit" => format!("{cli} hit its usage limit"),
        "rate_limit" => format!("{cli} hit a rate limit"),
        "auth" => format!("{cli} cannot log in"),
        "network" => format!("{cli} cannot reach its API"),
        "stalled" | "timeout" => format!("{cli} stalled"),
        "crash" => format!("{cli} exited in the middle of its turn"),
        "manual" if !detail.is_empty() => format!("{cli}'s work was handed on by {detail}"),
        "manual" => format!("{cli}'s work was handed on"),
        other => format!("{cli} failed ({other})"),
    }
}

pub(crate) const HANDOFF_REPLY_CHARS: usize = 1500;
pub(crate) const HANDOFF_STATUS_LINES: usize = 30;

/// `NAME-CLI`, or `NAME-CLI-2`, ... when taken; at most 64 characters.
pub(crate) fn free_name<T>(sessions: &BTreeMap<String, T>, name: &str, cli: &str) -> String {
    let cut = |s: String| s.chars().take(64).collect::<String>();
    let base = cut(format!("{name}-{cli}"));
    if !sessions.contains_key(&base) {
        return base;
    }
    (2..)
        .map(|n| {
            let suffix = format!("-{n}");
            format!(
                "{}{suffix}",
                cut(base.clone())
                    .chars()
                    .take(64 - suffix.len())
                    .collect::<String>()
            )
        })
        .find(|c| !sessions.contains_key(c))
        .unwrap_or(base)
}

/// The text typed into the new CLI: context first, then the request itself.
pub(crate) fn handoff_text(
    old: &SessionRecord,
    reason: &str,
    detail: &str,
    status: &Option<String>,
) -> String {
    let mut t = format!(
        "(Handoff: this continues work begun in {} (session {}), which stopped: {}",
        old.cli,
        old.name,
        why(&old.cli, reason, "")
    );
    if reason != "manual" && !detail.trim().is_empty() {
        t.push_str(&format!(" — {}", one_line(detail, 200)));
    }
    t.push('.');
    if let Some(r) = old.last_reply.as_deref().filter(|r| !r.trim().is_empty()) {
        let tail: String = {
            let chars: Vec<char> = r.trim().chars().collect();
            chars[chars.len().saturating_sub(HANDOFF_REPLY_CHARS)..]
                .iter()
                .collect()
        };
        t.push_str(&format!("\n{} last said:\n{tail}", old.cli));
    }
    match status {
        Some(s) if s.trim().is_empty() => t.push_str("\n`git status --short`: clean"),
        Some(s) => t.push_str(&format!("\n`git status --short`:\n{}", s.trim_end())),
        None => {}
    }
    t.push_str(")\n\n");
    if old.last_input.trim().is_empty() {
        t.push_str("Please continue the task.");
    } else {
        t.push_str(&old.last_input);
    }
    t
}

pub(crate) fn one_line(s: &str, max: usize) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max)
        .collect()
}

/// `git status --short` in `dir` when it is a repository (at most a few dozen lines); `None`
/// otherwise or when git is slow or missing.
pub(crate) async fn git_status(dir: &std::path::Path) -> Option<String> {
    // The repository is the chat user's: git must run none of its code (fsmonitor, filters).
    let text = crate::safe_git::status_short(dir).await?;
    let lines: Vec<&str> = text.lines().collect();
    let mut s = lines
        .iter()
        .take(HANDOFF_STATUS_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > HANDOFF_STATUS_LINES {
        s.push_str(&format!(
            "\n… and {} more",
            lines.len() - HANDOFF_STATUS_LINES
        ));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoff_carries_context_then_request() {
        let rec = SessionRecord {
            name: "api".into(),
            cli: "claude".into(),
            last_reply: Some("I edited src/a.rs".into()),
            last_input: "add tests for the parser".into(),
            ..Default::default()
        };
        let t = handoff_text(
            &rec,
            "usage_limit",
            "Claude usage limit reached",
            &Some(" M src/a.rs\n".into()),
        );
        assert!(t.starts_with("(Handoff: this continues work begun in claude (session api), which stopped: claude hit its usage limit — Claude usage limit reached."), "{t}");
        assert!(t.contains("claude last said:\nI edited src/a.rs"), "{t}");
        assert!(t.contains("`git status --short`:\n M src/a.rs)"), "{t}");
        assert!(t.ends_with("\n\nadd tests for the parser"), "{t}");
        let t = handoff_text(
            &SessionRecord {
                cli: "x".into(),
                ..Default::default()
            },
            "stalled",
            "",
            &None,
        );
        assert!(
            !t.contains("git status") && t.ends_with("Please continue the task."),
            "{t}"
        );
    }

    #[test]
    fn config_is_checked() {
        let clis = crate::config::Config::default().clis();
        let ok = DelegationConfig {
            to: vec!["codex".into()],
            ..Default::default()
        };
        assert_eq!(ok.validate(&clis), Ok(()));
        let bad = DelegationConfig {
            to: vec!["nope".into()],
            ..Default::default()
        };
        assert!(
            bad.validate(&clis)
                .expect_err("should fail")
                .contains("\"nope\" is not a configured CLI")
        );
        let zero = DelegationConfig {
            max_attempts: 0,
            ..Default::default()
        };
        assert!(
            zero.validate(&clis)
                .expect_err("should fail")
                .contains("max_attempts")
        );
    }

    fn chains(toml: &str) -> DelegationConfig {
        #[derive(Deserialize)]
        struct File {
            delegation: DelegationConfig,
        }
        toml::from_str::<File>(toml).expect("valid toml").delegation
    }

    #[test]
    fn each_failure_class_follows_its_own_chain() {
        let cfg = chains(
            r#"
[delegation]
on = ["usage_limit", "rate_limit", "network"]
to = ["codex", "gemini"]
max_attempts = 2

[delegation.chains.usage_limit]
to = ["gemini", "codex"]
max_attempts = 1

[delegation.chains.crash]
to = ["opencode"]

[delegation.chains.timeout]
to = ["codex"]
max_attempts = 3
"#,
        );
        let usage = cfg.chain_for("usage_limit").expect("its own chain");
        assert_eq!(usage.key, "[delegation.chains.usage_limit]");
        assert_eq!(usage.to, ["gemini".to_string(), "codex".to_string()]);
        assert_eq!(usage.max_attempts, 1);
        // A chain without max_attempts takes the flat one.
        let crash = cfg.chain_for("crash").expect("crash chain");
        assert_eq!((crash.to.len(), crash.max_attempts), (1, 2));
        // `timeout` and `stalled` are one class.
        let stalled = cfg.chain_for("stalled").expect("stalled is timeout");
        assert_eq!(
            (stalled.key.as_str(), stalled.max_attempts),
            ("[delegation.chains.timeout]", 3)
        );
        assert_eq!(cfg.chain_for("timeout"), Some(stalled));
        // The flat keys are the default chain for the kinds of `on` without a chain.
        let rate = cfg.chain_for("rate_limit").expect("default chain");
        assert_eq!(rate.key, "[delegation]");
        assert_eq!(rate.to, ["codex".to_string(), "gemini".to_string()]);
        assert_eq!(
            cfg.chain_for("network").map(|c| c.key),
            Some("[delegation]".into())
        );
        // Not listed anywhere, or a hand-on by a person: no automatic chain.
        assert_eq!(cfg.chain_for("auth"), None);
        assert_eq!(cfg.chain_for("manual"), None);
        assert_eq!(cfg.chain_for(""), None);
        // An empty default chain hands nothing on, but the classes' own chains still apply.
        let only_chains = chains(
            "[delegation]\non = [\"usage_limit\"]\n[delegation.chains.auth]\nto = [\"gemini\"]\n",
        );
        assert_eq!(only_chains.chain_for("usage_limit"), None);
        assert!(only_chains.chain_for("auth").is_some());
    }

    #[test]
    fn hops_count_against_the_chain_that_made_them() {
        let cfg = chains(
            r#"
[delegation]
on = ["usage_limit", "rate_limit"]
to = ["codex", "gemini"]
max_attempts = 1

[delegation.chains.auth]
to = ["gemini"]
max_attempts = 1
"#,
        );
        let reasons: Vec<String> = vec!["usage_limit".into(), "manual".into()];
        // Both kinds of the default chain count together, as with the flat keys alone.
        assert_eq!(
            cfg.chain_for("rate_limit").expect("chain").hops(&reasons),
            1
        );
        // A hop for a usage limit does not use up the auth chain; one for auth does.
        assert_eq!(cfg.chain_for("auth").expect("chain").hops(&reasons), 0);
        assert_eq!(
            cfg.chain_for("auth")
                .expect("chain")
                .hops(&["auth".to_string()]),
            1
        );
        // Candidates: in order, never a CLI the work ran in, only configured ones.
        let chain = cfg.chain_for("usage_limit").expect("chain");
        let visited = vec!["claude".to_string(), "codex".to_string()];
        assert_eq!(
            chain.candidates(&visited, |_| true),
            vec!["gemini".to_string()]
        );
        assert_eq!(
            chain.candidates(&["claude".to_string()], |c| c != "codex"),
            vec!["gemini".to_string()]
        );
        assert!(
            chain
                .candidates(&["codex".to_string(), "gemini".to_string()], |_| true)
                .is_empty()
        );
    }

    #[test]
    fn chain_config_errors_name_the_key() {
        let clis = crate::config::Config::default().clis();
        let err = |toml: &str| chains(toml).validate(&clis).expect_err("should fail");
        let e = err("[delegation.chains.auth]\nto = [\"nope\"]\n");
        assert!(
            e.starts_with("[delegation.chains.auth] to: \"nope\" is not a configured CLI (known: "),
            "{e}"
        );
        let e = err("[delegation.chains.crash]\nto = [\"codex\"]\nmax_attempts = 0\n");
        assert!(
            e.starts_with("[delegation.chains.crash] max_attempts must be at least 1"),
            "{e}"
        );
        let e = err("[delegation.chains.auth]\nto = []\n");
        assert!(
            e.starts_with("[delegation.chains.auth] to: name at least one CLI"),
            "{e}"
        );
        let e = err(
            "[delegation.chains.timeout]\nto = [\"codex\"]\n[delegation.chains.stalled]\nto = [\"gemini\"]\n",
        );
        assert!(e.contains("the same failure class"), "{e}");
        let e = err("[delegation.chains.manual]\nto = [\"codex\"]\n");
        assert!(e.contains("not an error kind"), "{e}");
        let e = err("[delegation]\nmax_attempts = 0\n");
        assert!(e.starts_with("[delegation] max_attempts"), "{e}");
        // An unknown key in a chain is refused when the file is read.
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct File {
            delegation: DelegationConfig,
        }
        let e = toml::from_str::<File>("[delegation.chains.auth]\nto = [\"codex\"]\nafter = 3\n")
            .expect_err("unknown key");
        assert!(e.to_string().contains("unknown field `after`"), "{e}");
        let ok =
            chains("[delegation.chains.auth]\nto = [\"codex\", \"gemini\"]\nmax_attempts = 2\n");
        assert_eq!(ok.validate(&clis), Ok(()));
    }
}
