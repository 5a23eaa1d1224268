//! Who may call each RPC from where: one row per method of `clibot.v1.Clibot`, read by the
//! server's gate before a call reaches its handler.
//!
//! Fail closed: a method with no row is refused to every caller, and a unit test compares the
//! table with the proto, so a new RPC cannot be served before someone decided who may call it.
//! The handlers still decide what a permitted caller may do (which sessions, which rights);
//! this table decides only where calls may come from.

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

/// Every RPC, with where it may be called from.
const TABLE: &[(&str, Reach)] = &[
    ("Status", Sessions),
    ("ListSessions", Sessions),
    ("GetSession", Sessions),
    ("SpawnSession", Sessions),
    ("StartSession", Sessions),
    ("Route", Sessions),
    ("SendInput", Sessions),
    ("SendKeys", Sessions),
    ("CancelTurn", Sessions),
    ("ListQueue", Sessions),
    ("DropQueued", Sessions),
    ("Capture", Sessions),
    ("StopSession", Sessions),
    ("AdoptSession", Outside),
    ("ReleaseSession", Sessions),
    ("RestartSession", Sessions),
    ("WatchEvents", Outside),
    ("AnswerPrompt", Sessions),
    ("GetLastReply", Sessions),
    ("Hook", Sessions),
    ("CheckAccess", Outside),
    ("ListPairings", Outside),
    ("ApprovePairing", Outside),
    ("RevokeAccess", Outside),
    ("AckEvents", Outside),
    ("GetCursor", Outside),
    ("SetBinding", Outside),
    ("ListBindings", Outside),
    // Its handler refuses anyone but the machine's user.
    ("SetDefaultChat", Sessions),
    ("Discover", Sessions),
    ("MarkChatBroken", Outside),
    ("ShareSession", Sessions),
    ("AckIngress", Outside),
    ("ListIngress", Outside),
    ("ReportGateway", Outside),
    ("GetTranscript", Outside),
    ("GetMetrics", Sessions),
    ("ListRules", Sessions),
    ("TestPatterns", Sessions),
    ("Reload", Outside),
    ("Delegate", Sessions),
    ("ReadBlob", Outside),
    ("GetFile", Sessions),
    ("PutFile", Sessions),
    ("ClaimOnce", Outside),
    // Its handler refuses anyone but the machine's user.
    ("AutomationReport", Sessions),
    ("CheckJail", Outside),
];

/// Where `method` (the last part of a call's path) may be called from; `None`: it has no row,
/// and is refused.
pub(crate) fn reach(method: &str) -> Option<Reach> {
    TABLE.iter().find(|(m, _)| *m == method).map(|(_, r)| *r)
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
        for (m, _) in TABLE {
            assert!(declared.iter().any(|d| d == m), "{m} is not in the proto");
            assert_eq!(
                TABLE.iter().filter(|(n, _)| n == m).count(),
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
    }
}
