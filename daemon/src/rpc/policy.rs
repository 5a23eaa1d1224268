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

/// Who may call a method, of the callers its [`Reach`] lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    /// The handler decides, by the caller's access (admins, a session's owner, …).
    Anyone,
    /// Only the machine's user (and processes in sessions made on the machine): a chat user is
    /// refused with `why`; the refusal is audited as `audit` when it names an action.
    Machine {
        why: &'static str,
        audit: Option<&'static str>,
    },
}

/// Every RPC, with where it may be called from and who may call it.
const TABLE: &[(&str, Reach, Who)] = &[
    ("Status", Sessions, Anyone),
    ("ListSessions", Sessions, Anyone),
    ("GetSession", Sessions, Anyone),
    ("SpawnSession", Sessions, Anyone),
    ("StartSession", Sessions, Anyone),
    ("Route", Sessions, Anyone),
    ("SendInput", Sessions, Anyone),
    ("SendKeys", Sessions, Anyone),
    ("CancelTurn", Sessions, Anyone),
    ("ListQueue", Sessions, Anyone),
    ("DropQueued", Sessions, Anyone),
    ("Capture", Sessions, Anyone),
    ("StopSession", Sessions, Anyone),
    ("AdoptSession", Outside, Anyone),
    ("ReleaseSession", Sessions, Anyone),
    ("RestartSession", Sessions, Anyone),
    ("WatchEvents", Outside, Anyone),
    ("AnswerPrompt", Sessions, Anyone),
    ("GetLastReply", Sessions, Anyone),
    ("Hook", Sessions, Anyone),
    ("CheckAccess", Outside, Anyone),
    ("ListPairings", Outside, Anyone),
    ("ApprovePairing", Outside, Anyone),
    ("RevokeAccess", Outside, Anyone),
    ("AckEvents", Outside, Anyone),
    ("GetCursor", Outside, Anyone),
    ("SetBinding", Outside, Anyone),
    ("ListBindings", Outside, Anyone),
    (
        "SetDefaultChat",
        Sessions,
        Who::Machine {
            why: "only the machine's user (the gateway) names the default chat",
            audit: Some("default_chat"),
        },
    ),
    ("Discover", Sessions, Anyone),
    ("MarkChatBroken", Outside, Anyone),
    ("ShareSession", Sessions, Anyone),
    ("AckIngress", Outside, Anyone),
    ("ListIngress", Outside, Anyone),
    ("ReportGateway", Outside, Anyone),
    ("GetTranscript", Outside, Anyone),
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
    ("Delegate", Sessions, Anyone),
    ("ReadBlob", Outside, Anyone),
    ("GetFile", Sessions, Anyone),
    ("PutFile", Sessions, Anyone),
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

/// Where `method` (the last part of a call's path) may be called from; `None`: it has no row,
/// and is refused.
pub(crate) fn reach(method: &str) -> Option<Reach> {
    TABLE
        .iter()
        .find(|(m, ..)| *m == method)
        .map(|(_, r, _)| *r)
}

/// Who may call `method`; [`Who::Anyone`] for a method with no row (which [`reach`] refuses).
pub(crate) fn who(method: &str) -> Who {
    TABLE
        .iter()
        .find(|(m, ..)| *m == method)
        .map_or(Who::Anyone, |(.., w)| *w)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn an_unknown_method_has_no_reach() {
        assert_eq!(reach("NoSuchMethod"), None);
        assert_eq!(reach("WatchEvents"), Some(Outside));
        assert_eq!(reach("Hook"), Some(Sessions));
        assert_eq!(who("SendInput"), Anyone);
        assert!(matches!(
            who("Reload"),
            Who::Machine {
                audit: Some("reload"),
                ..
            }
        ));
    }
}
