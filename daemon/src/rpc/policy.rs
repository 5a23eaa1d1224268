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
const TABLE: &[(&str, Reach, Who)] = &[
    ("Status", Sessions, Anyone),
    ("ListSessions", Sessions, Anyone),
    ("GetSession", Sessions, owner("status")),
    ("SpawnSession", Sessions, member("spawn")),
    ("StartSession", Sessions, admin("start")),
    ("Route", Sessions, member("route")),
    ("SendInput", Sessions, owner("send")),
    ("SendKeys", Sessions, owner("keys")),
    ("CancelTurn", Sessions, owner("cancel")),
    ("ListQueue", Sessions, owner("queue")),
    ("DropQueued", Sessions, owner("drop")),
    ("Capture", Sessions, owner("screen")),
    ("StopSession", Sessions, manager("stop")),
    ("AdoptSession", Outside, admin("adopt")),
    (
        "ReleaseSession",
        Sessions,
        Who::Manager {
            action: "release",
            admin: true,
        },
    ),
    ("RestartSession", Sessions, manager("restart")),
    ("WatchEvents", Outside, Anyone),
    ("AnswerPrompt", Sessions, owner("answer")),
    ("GetLastReply", Sessions, owner("last")),
    ("Hook", Sessions, Anyone),
    ("CheckAccess", Outside, Anyone),
    ("ListPairings", Outside, Anyone),
    ("ApprovePairing", Outside, Anyone),
    ("RevokeAccess", Outside, Anyone),
    ("AckEvents", Outside, Anyone),
    ("GetCursor", Outside, Anyone),
    ("SetBinding", Outside, owner("bind")),
    ("ListBindings", Outside, Anyone),
    (
        "SetDefaultChat",
        Sessions,
        Who::Machine {
            why: "only the machine's user (the gateway) names the default chat",
            audit: Some("default_chat"),
        },
    ),
    ("Discover", Sessions, admin("discover")),
    ("MarkChatBroken", Outside, Anyone),
    ("ShareSession", Sessions, Anyone),
    ("AckIngress", Outside, Anyone),
    ("ListIngress", Outside, Anyone),
    ("ReportGateway", Outside, Anyone),
    ("GetTranscript", Outside, member("history")),
    (
        "GetMetrics",
        Sessions,
        Who::Machine {
            why: "the metrics are for the local user only",
            audit: None,
        },
    ),
    ("ListRules", Sessions, Anyone),
    (
        "TestPatterns",
        Sessions,
        Who::Machine {
            why: "patterns are tested on the machine: clibotctl patterns test FILE",
            audit: None,
        },
    ),
    (
        "Reload",
        Outside,
        Who::Machine {
            why: "only the machine's user may reload the config",
            audit: Some("reload"),
        },
    ),
    ("Delegate", Sessions, owner("delegate")),
    ("ReadBlob", Outside, Anyone),
    ("GetFile", Sessions, owner("get")),
    ("PutFile", Sessions, owner("send")),
    ("ClaimOnce", Outside, Anyone),
    // It names every session's commands.
    (
        "AutomationReport",
        Sessions,
        Who::Machine {
            why: "the automation report is for the local user only",
            audit: None,
        },
    ),
    // It runs programs.
    (
        "CheckJail",
        Outside,
        Who::Machine {
            why: "the jail check is for the local user only (clibotctl doctor)",
            audit: None,
        },
    ),
];

/// The row of `method` (the last part of a call's path): where it may be called from and who
/// may call it; `None`: it has no row, and is refused.
pub(crate) fn row(method: &str) -> Option<(Reach, Who)> {
    TABLE
        .iter()
        .find(|(m, ..)| *m == method)
        .map(|(_, r, w)| (*r, *w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach(method: &str) -> Option<Reach> {
        row(method).map(|(r, _)| r)
    }

    fn who(method: &str) -> Who {
        row(method).map_or(Who::Anyone, |(_, w)| w)
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
        ];
        for (method, _, who) in TABLE {
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
        assert!(matches!(
            who("Reload"),
            Who::Machine {
                audit: Some("reload"),
                ..
            }
        ));
    }
}
