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

/// UTC year, month, day, hour, minute, second of a Unix time in milliseconds (Howard
/// Hinnant's `civil_from_days`): one way to write a time, for `clibotctl`'s logs and the
/// daemon's file names.
pub fn utc(ms: i64) -> [i64; 6] {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    [y, m, d, rem / 3600, rem / 60 % 60, rem % 60]
}
