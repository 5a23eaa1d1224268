//! Routing a new task to a CLI (`!!ask TEXT`, `clibotctl route TEXT`): the first `[[routes]]`
//! entry whose regex matches the text names the CLI; with none matching, the decider (when
//! `[decider]` is set) chooses among the configured CLIs. Pure: the daemon runs the decider and
//! starts the session.

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;

use crate::cli::CliSpec;

/// One `[[routes]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// A regex matched against the task's text (`(?i)` for any case).
    #[serde(rename = "match")]
    pub pattern: String,
    /// The configured CLI that takes such tasks.
    pub cli: String,
    /// Why, shown with the choice; default: "route N matched".
    #[serde(default)]
    pub why: String,
}

/// The compiled routes, in order.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: Vec<(Regex, RouteConfig)>,
}

/// Where a task goes, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub cli: String,
    /// "route 2", "decider".
    pub by: String,
    pub why: String,
}

impl Routes {
    /// Compiles the routes; the error names the entry and what to fix.
    pub fn compile(
        routes: &[RouteConfig],
        clis: &BTreeMap<String, CliSpec>,
    ) -> Result<Routes, String> {
        let mut out = Vec::new();
        for (i, r) in routes.iter().enumerate() {
            let n = i + 1;
            if !clis.contains_key(&r.cli) {
                return Err(format!(
                    "[[routes]] entry {n}: cli = {:?} is not a configured CLI (known: {})",
                    r.cli,
                    clis.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            let re = Regex::new(&r.pattern).map_err(|e| {
                format!(
                    "[[routes]] entry {n}: match = {:?} is not a valid regex: {e}",
                    r.pattern
                )
            })?;
            out.push((re, r.clone()));
        }
        Ok(Routes { routes: out })
    }

    /// The first route that matches `text` and names a CLI in `allowed` (the CLIs the asker
    /// may start).
    pub fn pick(&self, text: &str, allowed: &dyn Fn(&str) -> bool) -> Option<Choice> {
        self.routes
            .iter()
            .enumerate()
            .find(|(_, (re, r))| re.is_match(text) && allowed(&r.cli))
            .map(|(i, (re, r))| Choice {
                cli: r.cli.clone(),
                by: format!("route {}", i + 1),
                why: if r.why.is_empty() {
                    format!("it matches route {} ({})", i + 1, re.as_str())
                } else {
                    r.why.clone()
                },
            })
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// A session name for a routed task: `CLI-N`, the smallest N not taken.
pub fn session_name(cli: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let base: String = cli
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .take(50)
        .collect();
    let base = if base.is_empty() { "task".into() } else { base };
    (1..)
        .map(|n| format!("{base}-{n}"))
        .find(|n| !taken(n))
        .unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clis() -> BTreeMap<String, CliSpec> {
        crate::config::Config::default().clis()
    }

    fn route(pattern: &str, cli: &str) -> RouteConfig {
        RouteConfig {
            pattern: pattern.into(),
            cli: cli.into(),
            why: String::new(),
        }
    }

    #[test]
    fn the_first_matching_allowed_route_wins() {
        let r = Routes::compile(
            &[
                route("(?i)\\b(test|refactor)\\b", "codex"),
                route("(?i)docs?", "gemini"),
                route(".", "claude"),
            ],
            &clis(),
        )
        .expect("compiles");
        let all = |_: &str| true;
        let c = r.pick("Refactor the parser", &all).expect("a route");
        assert_eq!((c.cli.as_str(), c.by.as_str()), ("codex", "route 1"));
        assert!(c.why.contains("route 1"), "{}", c.why);
        assert_eq!(r.pick("write the docs", &all).expect("route").cli, "gemini");
        assert_eq!(r.pick("anything", &all).expect("route").cli, "claude");
        // A CLI the asker may not start is passed over.
        let no_codex = |c: &str| c != "codex";
        assert_eq!(
            r.pick("refactor it", &no_codex).expect("route").cli,
            "claude"
        );
        assert!(r.pick("", &all).is_none());
    }

    #[test]
    fn bad_routes_name_the_entry() {
        let e = Routes::compile(&[route("(", "codex")], &clis()).expect_err("bad regex");
        assert!(e.contains("entry 1") && e.contains("regex"), "{e}");
        let e = Routes::compile(&[route("x", "nope")], &clis()).expect_err("unknown cli");
        assert!(
            e.contains("nope") && e.contains("not a configured CLI"),
            "{e}"
        );
    }

    #[test]
    fn routed_sessions_get_free_names() {
        let taken = |n: &str| n == "codex-1" || n == "codex-2";
        assert_eq!(session_name("codex", &taken), "codex-3");
        assert_eq!(session_name("claude", &|_| false), "claude-1");
    }
}
