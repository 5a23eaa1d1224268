//! Reading `list-panes -a`: the rows tmux prints for clibot's format, and the sessions they
//! describe.

use super::{MuxSession, SEP, SessionMeta};

/// One row per pane (`list-panes -a`): a session's CLI is its first pane, which a window the
/// user opens later (prefix-c at the desk) does not replace, as the *active* pane would.
pub(super) const LIST_FORMAT: &str = "#{session_id}\t#{session_name}\t#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{@clibot_id}\t#{@clibot_name}\t#{@clibot_cli}\t#{@clibot_dir}\t#{@clibot_created}\t#{pane_current_path}";

/// Every pane row of `list-panes -a` output, in the order listed.
pub(super) fn parse_panes_rows(out: &str) -> Vec<MuxSession> {
    // A path may hold a tab or a line break: `pane_current_path` is the last field (a tab in it
    // stays in it), and a line that does not begin a row (`$id` and a tab) continues the row
    // before it.
    let mut rows: Vec<String> = Vec::new();
    for line in out.lines() {
        let begins = line
            .strip_prefix('$')
            .and_then(|r| r.split_once(SEP))
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        match rows.last_mut() {
            Some(last) if !begins => {
                last.push('\n');
                last.push_str(line);
            }
            _ => rows.push(line.to_string()),
        }
    }
    rows.iter()
        .filter_map(|line| {
            let f: Vec<&str> = line.splitn(12, SEP).collect();
            if f.len() != 12 || !f[2].starts_with('%') {
                return None;
            }
            Some(MuxSession {
                id: f[0].to_string(),
                name: f[1].to_string(),
                pane: f[2].to_string(),
                pid: f[3].parse().unwrap_or(0),
                dead: f[4] == "1",
                dead_status: f[5].parse().ok(),
                path: f[11].to_string(),
                meta: SessionMeta {
                    id: f[6].to_string(),
                    name: f[7].to_string(),
                    cli: f[8].to_string(),
                    dir: f[9].to_string(),
                    created_ms: f[10].to_string(),
                },
            })
        })
        .collect()
}

/// One entry per session: its first pane (the lowest pane number), in the order listed.
pub(super) fn parse_sessions(listed: &str) -> Vec<MuxSession> {
    let mut out: Vec<MuxSession> = Vec::new();
    for p in parse_panes_rows(listed) {
        match out.iter_mut().find(|s| s.id == p.id) {
            Some(s) if pane_number(&p.pane) < pane_number(&s.pane) => *s = p,
            Some(_) => {}
            None => out.push(p),
        }
    }
    out
}

/// `%12` → 12 (unknown forms sort last).
fn pane_number(pane: &str) -> u64 {
    pane.strip_prefix('%')
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}
