//! Texts that both `clibotctl` and the chats show, so that they read the same.

use crate::v1;

impl v1::ListRulesResponse {
    /// `clibotctl rules` and `!!rules`: one line per rule, then the guard, decider and
    /// delegation.
    pub fn describe(&self) -> String {
        let r = self;
        let mut t = String::new();
        if r.rules.is_empty() {
            t.push_str("no [[rules]]: every prompt waits for a person (or the decider)\n");
        }
        for x in &r.rules {
            let mut when = Vec::new();
            if !x.cli.is_empty() {
                when.push(format!("cli={}", x.cli));
            }
            if !x.session.is_empty() {
                when.push(format!("session={}", x.session));
            }
            when.push(format!(
                "kind={}",
                if x.kind.is_empty() {
                    "permission|confirm"
                } else {
                    &x.kind
                }
            ));
            if !x.subject.is_empty() {
                when.push(format!("subject=/{}/", x.subject));
            }
            if !x.command.is_empty() {
                when.push(format!("command={}", x.command.join(" | ")));
            }
            t.push_str(&format!(
                "rule {}: {} when {} (fired {}×)\n",
                x.index,
                x.action,
                when.join(" "),
                x.fired
            ));
        }
        t.push_str(&format!("guard (always asked): {}\n", r.guard.join("; ")));
        if r.decider.is_empty() {
            t.push_str("decider: none\n");
        } else {
            t.push_str(&format!(
                "decider: {} (timeout {} ms; answered {}, left to a person {})\n",
                r.decider.join(" "),
                r.decider_timeout_ms,
                r.decider_answered,
                r.decider_asked
            ));
        }
        let who = if r.delegation_default {
            "every session"
        } else {
            "sessions spawned with --delegate"
        };
        // The kinds of `on` that have a chain of their own follow that one.
        let on: Vec<&str> = r
            .delegation_on
            .iter()
            .filter(|k| !r.delegation_chains.iter().any(|c| &c.kind == *k))
            .map(String::as_str)
            .collect();
        if r.delegation_to.is_empty() && r.delegation_chains.is_empty() {
            t.push_str("delegation: off ([delegation] to is empty)\n");
        } else if !r.delegation_to.is_empty() && !on.is_empty() {
            t.push_str(&format!(
                "delegation: on {} → {} (at most {} hop(s); {who})\n",
                on.join(", "),
                r.delegation_to.join(", "),
                r.delegation_max_attempts,
            ));
        }
        for c in &r.delegation_chains {
            t.push_str(&format!(
                "delegation: on {} → {} (at most {} hop(s); {who})\n",
                c.kind,
                c.to.join(", "),
                c.max_attempts,
            ));
        }
        t
    }
}
