//! Who is calling, as the process tree tells: a call whose process descends from a managed
//! session's pane acts with that session owner's rights, whatever chat identity it claims.
//!
//! Why this works against escapes: each session's program is started by the launcher as a
//! child subreaper (see [`crate::confine::launch`]), so a process that double-forks or `setsid`s away
//! is re-parented to the pane's process, not to init, and its ancestry still reaches the pane.
//! This guards unjailed sessions (admins', the local user's, or `sandbox = "off"`); the jail is
//! the boundary for non-admins.

use crate::core::Daemon;

/// Longest ancestry followed; deeper trees are not real process trees.
const MAX_DEPTH: usize = 128;

/// Where a call comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Caller {
    /// Not from inside a managed session: the user at the machine, the gateway, a script.
    Outside,
    /// From inside session `name`, made for `owner` ("PLATFORM:USER", empty: the machine's).
    Session { name: String, owner: String },
    /// Through the per-session hook socket of session id `id`: hook calls of it only.
    HookSocket { id: String },
    /// A process whose ancestry cannot be followed to the top (it exited after connecting,
    /// handing its connection to a child; or `/proc` would not say): refused, never taken for
    /// the machine's user.
    Unknown,
}

/// `pid`'s parent, from `/proc/PID/stat` (the field after the command name, which may hold
/// spaces and parentheses: read after the last `)`).
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `pid` and its ancestors, nearest first, up to (not including) pid 1; `None` when the walk
/// does not reach the top (a process on the way is gone, or unreadable, or the chain loops).
pub fn ancestry(pid: i32) -> Option<Vec<i32>> {
    let mut out = Vec::new();
    let mut p = pid;
    while p > 1 {
        if out.len() >= MAX_DEPTH || out.contains(&p) {
            return None;
        }
        out.push(p);
        p = parent(p)?;
    }
    Some(out)
}

impl Daemon {
    /// The caller behind process `pid`.
    pub fn caller_of(&self, pid: Option<i32>) -> Caller {
        let Some(pid) = pid.filter(|p| *p > 1) else {
            return Caller::Unknown;
        };
        let Some(chain) = ancestry(pid) else {
            return Caller::Unknown;
        };
        // From one look at the table: the live sessions' processes, in the order of their names.
        let running = self.sessions().filter_map(|e| {
            (e.rec.pid != 0 && !e.rec.state.is_exited())
                .then(|| (e.rec.pid, e.rec.name.clone(), e.rec.owner.clone()))
        });
        for p in chain {
            if let Some((_, name, owner)) =
                running.iter().find(|(pid, _, _)| *pid as i64 == p as i64)
            {
                return Caller::Session {
                    name: name.clone(),
                    owner: owner.clone(),
                };
            }
        }
        Caller::Outside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ancestry_of_this_process_reaches_its_parent() {
        let me = std::process::id() as i32;
        let chain = ancestry(me).expect("this process's ancestry reaches the top");
        assert_eq!(chain.first(), Some(&me));
        let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
        if let Some(pp) = ppid.filter(|p| *p > 1) {
            assert_eq!(chain.get(1), Some(&pp), "{chain:?}");
        }
        assert_eq!(ancestry(0), Some(vec![]));
        assert_eq!(ancestry(i32::MAX), None, "a process that does not exist");
    }
}
