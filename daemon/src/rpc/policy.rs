//! Who may call each RPC from where: one row per method of `clibot.v1.Clibot`, read by the
//! server's gate before a call reaches its handler.
//!
//! Fail closed: a method with no row is refused to every caller, and a unit test compares the
//! table with the proto, so a new RPC cannot be served before someone decided who may call it.
//! A second column says who may call it: anyone the first column lets through (the handler
//! then decides which sessions and rights, from the caller's access), or only the machine's
//! user — then the gate refuses a chat user (and a process inside a chat user's session) with
//! the row's words, and audits the refusal under the row's action when it has one.

/// Where a method may be called from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Also from inside a chat user's session (its handler checks the session's owner's
    /// rights): what a member's CLI may ask for itself.
    Sessions,
    /// Only the gateway and the machine's user: never a process inside a chat user's session,
    /// which would read other chats' events, bind chats or approve pairings.
    Outside,
}

/// What the audit log keeps of a call, under its row's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    /// Refusals only: reading, listing, the gateway's bookkeeping.
    Refusals,
    /// Refusals and, once the caller passed its row's check, how the call ended (accepted, or
    /// refused with the error): what changes a session. Such a call also runs to its end when
    /// its caller hangs up (the gate runs it apart from the connection): an action cut off
    /// halfway — a session left "being stopped", text typed without its Enter, a chat
    /// message typed but its key not recorded — is worse than one that finishes with nobody
    /// waiting for the answer.
    Outcome,
}

/// A method's row: where it may be called from, who may call it, what the audit log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) reach: Reach,
    pub(crate) who: Who,
    pub(crate) kept: Kept,
}

impl Row {
    /// The action the audit log names this call by: its row's (`None` for `Anyone`, whose
    /// handler decides).
    pub(crate) fn action(&self) -> Option<&'static str> {
        match self.who {
            Who::Anyone => None,
            Who::Member { action }
            | Who::Admin { action }
            | Who::Owner { action }
            | Who::Manager { action, .. } => Some(action),
            Who::Machine { audit, .. } => audit,
        }
    }
}

/// What the gate hands a call's handler of its row ([`crate::rpc::convert::rights`]): what a
/// chat user needs, and where the handler notes the session it let the caller act on — the
/// gate audits the call's outcome under it when the row keeps outcomes.
#[derive(Debug, Clone)]
pub(crate) struct Rights {
    pub(crate) who: Who,
    let_in: Arc<Mutex<Option<String>>>,
}

impl Rights {
    pub(crate) fn new(who: Who) -> Rights {
        Rights {
            who,
            let_in: Arc::default(),
        }
    }

    /// The caller passed the row's check for `session` (empty when the call names none).
    pub(crate) fn let_in(&self, session: &str) {
        *crate::locking::lock(&self.let_in) = Some(session.to_string());
    }

    /// The session the handler let the caller act on; `None` when it refused them (and audited
    /// that itself) or never got that far.
    pub(crate) fn session_let_in(&self) -> Option<String> {
        crate::locking::lock(&self.let_in).clone()
    }
}

use std::sync::{Arc, Mutex};

use Kept::{Outcome, Refusals};
use Reach::{Outside, Sessions};
use Who::Anyone;

/// Who may call a method, of the callers its [`Reach`] lets through. The machine's user (and a
/// process in a session made on the machine) may call every method; the variants say what a
/// chat user needs. `action` names the call in refusals and in the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    /// The handler decides, by the caller's access: a list it filters, a call it checks in
    /// its own way (the gateway's bookkeeping, a hook's session).
    Anyone,
    /// Any chat user the access policy lets in (paired, allowed).
    Member { action: &'static str },
    /// Admins only.
    Admin { action: &'static str },
    /// A chat user let in, on a session that is theirs: their own, one shared with them, any
    /// for admins. The handler names the session.
    Owner { action: &'static str },
    /// Manages a session: its owner or an admin, never someone it is only shared with
    /// (`admin`: admins only).
    Manager { action: &'static str, admin: bool },
    /// Only the machine's user (and processes in sessions made on the machine): a chat user is
    /// refused at the gate with `why`; the refusal is audited as `audit` when it names an
    /// action.
    Machine {
        why: &'static str,
        audit: Option<&'static str>,
    },
}

const fn member(action: &'static str) -> Who {
    Who::Member { action }
}

const fn admin(action: &'static str) -> Who {
    Who::Admin { action }
}

const fn owner(action: &'static str) -> Who {
    Who::Owner { action }
}

const fn manager(action: &'static str) -> Who {
    Who::Manager {
        action,
        admin: false,
    }
}

/// Every RPC, with where it may be called from and who may call it.
const TABLE: &[(&str, Reach, Who, Kept)] = &[
    ("Status", Sessions, Anyone, Refusals),
    ("ListSessions", Sessions, Anyone, Refusals),
    ("GetSession", Sessions, owner("status"), Refusals),
    ("SpawnSession", Sessions, member("spawn"), Outcome),
    ("StartSession", Sessions, admin("start"), Outcome),
    ("Route", Sessions, member("route"), Outcome),
    ("SendInput", Sessions, owner("send"), Outcome),
    ("SendKeys", Sessions, owner("keys"), Outcome),
    ("CancelTurn", Sessions, owner("cancel"), Outcome),
    ("ListQueue", Sessions, owner("queue"), Refusals),
    ("DropQueued", Sessions, owner("drop"), Refusals),
    ("Capture", Sessions, owner("screen"), Refusals),
    ("StopSession", Sessions, manager("stop"), Outcome),
    ("AdoptSession", Outside, admin("adopt"), Outcome),
    (
        "ReleaseSession",
        Sessions,
        Who::Manager {
            action: "release",
            admin: true,
        },
        Outcome,
    ),
    ("RestartSession", Sessions, manager("restart"), Outcome),
    ("WatchEvents", Outside, Anyone, Refusals),
    ("AnswerPrompt", Sessions, owner("answer"), Outcome),
    ("GetLastReply", Sessions, owner("last"), Refusals),
    ("Hook", Sessions, Anyone, Refusals),
    ("CheckAccess", Outside, Anyone, Refusals),
    ("ListPairings", Outside, Anyone, Refusals),
    ("ApprovePairing", Outside, Anyone, Refusals),
    ("RevokeAccess", Outside, Anyone, Refusals),
    ("AckEvents", Outside, Anyone, Refusals),
    ("GetCursor", Outside, Anyone, Refusals),
    ("SetBinding", Outside, owner("bind"), Refusals),
    ("ListBindings", Outside, Anyone, Refusals),
    (
        "SetDefaultChat",
        Sessions,
        Who::Machine {
            why: "only the machine's user (the gateway) names the default chat",
            audit: Some("default_chat"),
        },
        Refusals,
    ),
    ("Discover", Sessions, admin("discover"), Refusals),
    ("MarkChatBroken", Outside, Anyone, Refusals),
    ("ShareSession", Sessions, Anyone, Refusals),
    ("AckIngress", Outside, Anyone, Refusals),
    ("ListIngress", Outside, Anyone, Refusals),
    ("ReportGateway", Outside, Anyone, Refusals),
    ("GetTranscript", Outside, member("history"), Refusals),
    (
        "GetMetrics",
        Sessions,
        Who::Machine {
            why: "the metrics are for the local user only",
            audit: None,
        },
        Refusals,
    ),
    ("ListRules", Sessions, Anyone, Refusals),
    (
        "TestPatterns",
        Sessions,
        Who::Machine {
            why: "patterns are tested on the machine: clibotctl patterns test FILE",
            audit: None,
        },
        Refusals,
    ),
    (
        "Reload",
        Outside,
        Who::Machine {
            why: "only the machine's user may reload the config",
            audit: Some("reload"),
        },
        Refusals,
    ),
    ("Delegate", Sessions, owner("delegate"), Outcome),
    ("ReadBlob", Outside, Anyone, Refusals),
    ("GetFile", Sessions, owner("get"), Refusals),
    ("PutFile", Sessions, owner("send"), Refusals),
    ("ClaimOnce", Outside, Anyone, Refusals),
    // It names every session's commands.
    (
        "AutomationReport",
        Sessions,
        Who::Machine {
            why: "the automation report is for the local user only",
            audit: None,
        },
        Refusals,
    ),
    // A chat user's own jobs, on sessions they own; the handlers check which.
    ("AddJob", Sessions, member("job add"), Outcome),
    ("ListJobs", Sessions, Anyone, Refusals),
    ("RemoveJob", Sessions, member("job remove"), Outcome),
    ("PauseJob", Sessions, member("job pause"), Outcome),
    ("RunJob", Sessions, member("job run"), Outcome),
    // A goal types into the session: who may manage it.
    ("SetGoal", Sessions, manager("goal"), Outcome),
    // Read-only; the handler keeps a chat user to their own sessions' turns.
    ("GetUsage", Sessions, Anyone, Refusals),
    // A list the handler filters; a lift lets held input go: admins, never a session.
    ("ListBudgets", Sessions, Anyone, Refusals),
    ("LiftBudget", Outside, admin("budget lift"), Outcome),
    // The handler reads the limit's session from its event and checks the caller may use it.
    ("LimitAction", Sessions, Anyone, Refusals),
    // The handler checks the caller owned the worktree's session (or is an admin) and audits
    // each action by its name; a process inside a session never merges, pushes or discards.
    ("Worktree", Outside, member("worktree"), Outcome),
    // A chat's own board (the handler keys it by the caller's chat); the gateway lists them.
    ("Board", Outside, member("board"), Refusals),
    // It runs programs.
    (
        "CheckJail",
        Outside,
        Who::Machine {
            why: "the jail check is for the local user only (clibotctl doctor)",
            audit: None,
        },
        Refusals,
    ),
];

/// The row of `method` (the last part of a call's path): where it may be called from and who
/// may call it; `None`: it has no row, and is refused.
pub(crate) fn row(method: &str) -> Option<Row> {
    TABLE
        .iter()
        .find(|(m, ..)| *m == method)
        .map(|&(_, reach, who, kept)| Row { reach, who, kept })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach(method: &str) -> Option<Reach> {
        row(method).map(|r| r.reach)
    }

    fn who(method: &str) -> Who {
        row(method).map_or(Who::Anyone, |r| r.who)
    }

    const PROTO: &str = include_str!("../../../proto/proto/clibot/v1/clibot.proto");

    /// The RPCs the proto declares.
    fn declared() -> Vec<String> {
        PROTO
            .lines()
            .filter_map(|l| l.trim().strip_prefix("rpc "))
            .filter_map(|rest| rest.split('(').next())
            .map(|m| m.trim().to_string())
            .collect()
    }

    #[test]
    fn every_rpc_has_exactly_one_row_and_every_row_an_rpc() {
        let declared = declared();
        assert!(declared.len() > 40, "{declared:?}");
        let missing: Vec<&String> = declared.iter().filter(|m| reach(m).is_none()).collect();
        assert!(
            missing.is_empty(),
            "RPCs with no row in rpc/policy.rs (refused to everyone until they get one): {missing:?}"
        );
        for (m, ..) in TABLE {
            assert!(declared.iter().any(|d| d == m), "{m} is not in the proto");
            assert_eq!(
                TABLE.iter().filter(|(n, ..)| n == m).count(),
                1,
                "{m} has two rows"
            );
        }
    }

    /// The request message of each RPC, and whether it names a session.
    fn names_a_session(method: &str) -> bool {
        let Some(line) = PROTO
            .lines()
            .find(|l| l.trim().starts_with(&format!("rpc {method}(")))
        else {
            return false;
        };
        let request = line
            .split('(')
            .nth(1)
            .and_then(|r| r.split(')').next())
            .map(|r| r.trim_start_matches("stream ").trim())
            .unwrap_or_default();
        let Some(start) = PROTO.find(&format!("message {request} {{")) else {
            return false;
        };
        PROTO[start..]
            .lines()
            .take_while(|l| !l.starts_with('}'))
            .any(|l| l.trim().starts_with("string session = "))
    }

    /// A method that acts on a session a chat user names says what they need for it, so the
    /// handler checks it from the row; the few whose handlers decide give their reason here.
    #[test]
    fn a_method_on_a_named_session_says_what_a_chat_user_needs() {
        const HANDLER_DECIDES: &[(&str, &str)] = &[
            (
                "GetCursor",
                "the gateway's own bookkeeping: never from a session",
            ),
            (
                "ListBindings",
                "the gateway's own bookkeeping: never from a session",
            ),
            (
                "ShareSession",
                "only its owner shares it, with a user it names: the core checks both",
            ),
            ("ListRules", "a list, filtered to what the caller may read"),
            (
                "GetUsage",
                "a sum, filtered to the turns of sessions the caller owns",
            ),
        ];
        for (method, _, who, _) in TABLE {
            if *who == Anyone && names_a_session(method) {
                assert!(
                    HANDLER_DECIDES.iter().any(|(m, _)| m == method),
                    "{method} acts on a session a caller names: give it a chat right (owner, manager, ...) in its row"
                );
            }
        }
        assert!(names_a_session("SendInput") && names_a_session("PutFile"));
        assert!(!names_a_session("Status"));
    }

    /// A call whose outcome is kept is audited under its row's action, checked by its
    /// handler for the session it names.
    #[test]
    fn a_method_whose_outcome_is_kept_names_its_action() {
        for (method, _, who, kept) in TABLE {
            if *kept == Outcome {
                assert!(
                    matches!(
                        who,
                        Who::Member { .. }
                            | Who::Admin { .. }
                            | Who::Owner { .. }
                            | Who::Manager { .. }
                    ),
                    "{method}: an audited outcome needs a chat right naming its action"
                );
            }
        }
    }

    #[test]
    fn an_unknown_method_has_no_reach() {
        assert_eq!(reach("NoSuchMethod"), None);
        assert_eq!(reach("WatchEvents"), Some(Outside));
        assert_eq!(reach("Hook"), Some(Sessions));
        assert_eq!(who("SendInput"), owner("send"));
        assert_eq!(who("ListSessions"), Anyone);
        assert_eq!(
            who("ReleaseSession"),
            Who::Manager {
                action: "release",
                admin: true
            }
        );
        assert_eq!(row("StopSession").map(|r| r.kept), Some(Outcome));
        assert_eq!(row("Capture").map(|r| r.kept), Some(Refusals));
        assert_eq!(row("SendInput").and_then(|r| r.action()), Some("send"));
        assert!(matches!(
            who("Reload"),
            Who::Machine {
                audit: Some("reload"),
                ..
            }
        ));
    }
}
