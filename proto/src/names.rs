//! The names users' scripts read for the contract's enums: `--json`, the event log and the
//! rules say "permission", "hook", "command", not `PROMPT_KIND_PERMISSION`. One place turns
//! each enum into its name and back, for every crate.

use crate::v1::{
    ActorKind, GoalEnd, JobOutcome, JobTrigger, Prompt, PromptKind, PromptSource, SubjectKind,
    TurnEnd,
};

impl PromptKind {
    /// The kinds clibot gives a meaning of its own, each with its name.
    pub const NAMED: [PromptKind; 7] = [
        PromptKind::Permission,
        PromptKind::Question,
        PromptKind::Confirm,
        PromptKind::Select,
        PromptKind::Trust,
        PromptKind::Secret,
        PromptKind::Continue,
    ];

    /// The kind named `name`, when clibot gives it a meaning of its own.
    pub fn named(name: &str) -> Option<PromptKind> {
        PromptKind::NAMED.into_iter().find(|k| k.name() == name)
    }

    /// "permission", "question", ...; "" for UNSPECIFIED and for OTHER (whose name is the
    /// prompt's `other_kind`: see [`Prompt::kind_name`]).
    pub fn name(self) -> &'static str {
        match self {
            PromptKind::Permission => "permission",
            PromptKind::Question => "question",
            PromptKind::Confirm => "confirm",
            PromptKind::Select => "select",
            PromptKind::Trust => "trust",
            PromptKind::Secret => "secret",
            PromptKind::Continue => "continue",
            PromptKind::Unspecified | PromptKind::Other => "",
        }
    }
}

impl Prompt {
    /// The kind as users name it: "permission", or a pack's own kind ("deploy").
    pub fn kind_name(&self) -> &str {
        match self.kind() {
            PromptKind::Other => &self.other_kind,
            k => k.name(),
        }
    }

    /// Sets the kind from its name: a name clibot gives no meaning of its own is OTHER, kept
    /// in `other_kind`.
    pub fn set_kind_name(&mut self, name: &str) {
        match PromptKind::named(name) {
            Some(k) => {
                self.set_kind(k);
                self.other_kind.clear();
            }
            None if name.is_empty() => {
                self.set_kind(PromptKind::Unspecified);
                self.other_kind.clear();
            }
            None => {
                self.set_kind(PromptKind::Other);
                self.other_kind = name.to_string();
            }
        }
    }

    /// True for a password, passphrase or token: never shown back, never kept.
    pub fn is_secret(&self) -> bool {
        self.kind() == PromptKind::Secret
    }
}

impl PromptSource {
    /// "hook", "screen", "api"; "" for UNSPECIFIED.
    pub fn name(self) -> &'static str {
        match self {
            PromptSource::Hook => "hook",
            PromptSource::Screen => "screen",
            PromptSource::Api => "api",
            PromptSource::Unspecified => "",
        }
    }
}

impl SubjectKind {
    /// "command", "path", "url"; "" when unknown.
    pub fn name(self) -> &'static str {
        match self {
            SubjectKind::Command => "command",
            SubjectKind::Path => "path",
            SubjectKind::Url => "url",
            SubjectKind::Unspecified => "",
        }
    }
}

impl TurnEnd {
    /// "hook", "api", "screen", "transcript", "idle"; "" for UNSPECIFIED.
    pub fn name(self) -> &'static str {
        match self {
            TurnEnd::Hook => "hook",
            TurnEnd::Api => "api",
            TurnEnd::Screen => "screen",
            TurnEnd::Transcript => "transcript",
            TurnEnd::Idle => "idle",
            TurnEnd::Unspecified => "",
        }
    }
}

impl JobTrigger {
    /// "schedule", "late", "manual", "idle", "webhook"; "" for UNSPECIFIED.
    pub fn name(self) -> &'static str {
        match self {
            JobTrigger::Schedule => "schedule",
            JobTrigger::Late => "late",
            JobTrigger::Manual => "manual",
            JobTrigger::Idle => "idle",
            JobTrigger::Webhook => "webhook",
            JobTrigger::Unspecified => "",
        }
    }
}

impl JobOutcome {
    /// "done", "gate_skipped", "failed", "cancelled"; "" for UNSPECIFIED.
    pub fn name(self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::GateSkipped => "gate_skipped",
            JobOutcome::Failed => "failed",
            JobOutcome::Cancelled => "cancelled",
            JobOutcome::Unspecified => "",
        }
    }
}

impl GoalEnd {
    /// "reached", "turns", "time", "person", "off", "ended"; "" for UNSPECIFIED.
    pub fn name(self) -> &'static str {
        match self {
            GoalEnd::Reached => "reached",
            GoalEnd::Turns => "turns",
            GoalEnd::Time => "time",
            GoalEnd::Person => "person",
            GoalEnd::Off => "off",
            GoalEnd::Ended => "ended",
            GoalEnd::Unspecified => "",
        }
    }
}

impl ActorKind {
    /// "local", "chat"; "" for UNSPECIFIED.
    pub fn name(self) -> &'static str {
        match self {
            ActorKind::Local => "local",
            ActorKind::Chat => "chat",
            ActorKind::Unspecified => "",
        }
    }

    /// The kind of the caller an actor key names: "local" is the machine's user,
    /// "PLATFORM:USER" a chat user, anything else (an empty key) is not known.
    pub fn of_key(key: &str) -> ActorKind {
        if key == "local" {
            ActorKind::Local
        } else if key.contains(':') {
            ActorKind::Chat
        } else {
            ActorKind::Unspecified
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name goes there and back, and a pack's own kind keeps its name.
    #[test]
    fn prompt_kinds_keep_their_names() {
        for name in [
            "permission",
            "question",
            "confirm",
            "select",
            "trust",
            "secret",
            "continue",
            "deploy",
            "",
        ] {
            let mut p = Prompt::default();
            p.set_kind_name(name);
            assert_eq!(p.kind_name(), name);
        }
        let mut p = Prompt::default();
        p.set_kind_name("deploy");
        assert_eq!(p.kind(), PromptKind::Other);
        p.set_kind_name("secret");
        assert!(p.is_secret());
        assert!(p.other_kind.is_empty());
    }

    /// The enums' names are the lower-case ends of their proto names, which `--json` keeps.
    #[test]
    fn names_are_the_proto_names_lower_case() {
        let check = |proto: &str, prefix: &str, name: &str| {
            if !name.is_empty() {
                assert_eq!(
                    proto.strip_prefix(prefix).map(str::to_lowercase),
                    Some(name.to_string())
                );
            }
        };
        for k in PromptKind::NAMED {
            check(k.as_str_name(), "PROMPT_KIND_", k.name());
        }
        for s in [PromptSource::Hook, PromptSource::Screen, PromptSource::Api] {
            check(s.as_str_name(), "PROMPT_SOURCE_", s.name());
        }
        for s in [SubjectKind::Command, SubjectKind::Path, SubjectKind::Url] {
            check(s.as_str_name(), "SUBJECT_KIND_", s.name());
        }
        for t in [
            TurnEnd::Hook,
            TurnEnd::Api,
            TurnEnd::Screen,
            TurnEnd::Transcript,
            TurnEnd::Idle,
        ] {
            check(t.as_str_name(), "TURN_END_", t.name());
        }
    }

    /// An actor key names its kind: the machine's user, a chat user, or nobody known.
    #[test]
    fn actor_keys_name_their_kind() {
        assert_eq!(ActorKind::of_key("local"), ActorKind::Local);
        assert_eq!(ActorKind::of_key("telegram:123"), ActorKind::Chat);
        assert_eq!(ActorKind::of_key(""), ActorKind::Unspecified);
        assert_eq!(ActorKind::Chat.name(), "chat");
        assert_eq!(ActorKind::Local.name(), "local");
    }
}
