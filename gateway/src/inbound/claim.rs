//! Once-only handling of chat messages that change something.
//!
//! Platforms hand an update over again when the gateway stopped before confirming it (a
//! Telegram update whose offset was not sent yet, a Discord message past the recorded
//! cursor). Text for a CLI carries a dedupe key the daemon checks; commands and button
//! presses with side effects (`!!keys`, `!!restart`, `!!new`, an answer, …) are claimed with
//! the daemon's `ClaimOnce` before they act, under the same key as the text's —
//! `PLATFORM:CHAT:MESSAGE_ID` — or, for a button press, `PLATFORM-cb:CALLBACK_ID`. A claim
//! that is not fresh means another gateway process already acted: nothing happens again.
//!
//! A claim made by this process whose action was cut short (the daemon went away in
//! between, and the message is being handled again) still acts: that is the same handling,
//! not a redelivery.

use std::sync::Mutex;

use clibot_gateway::command::Command;
use clibot_proto::v1;

use crate::bounded::Bounded;
use crate::platforms::Inbound;

/// The key a message is claimed under, if it has an id.
pub fn key(platform: &str, msg: &Inbound) -> Option<String> {
    if msg.id.is_empty() {
        return None;
    }
    Some(if msg.prompt.is_some() {
        format!("{platform}-cb:{}", msg.id)
    } else {
        format!("{platform}:{}:{}", msg.chat, msg.id)
    })
}

/// Whether a command changes something, so that doing it twice is not the same as once.
/// (Exhaustive on purpose: a new command must be decided here.)
pub fn has_effects(cmd: &Command) -> bool {
    match cmd {
        Command::Use { .. }
        | Command::New { .. }
        | Command::Keys { .. }
        | Command::Stop { .. }
        | Command::Start { .. }
        | Command::Adopt { .. }
        | Command::Cancel { .. }
        | Command::Drop { .. }
        | Command::Ask { .. }
        | Command::Restart { .. }
        | Command::Answer { .. }
        | Command::Share { .. }
        | Command::Delegate { .. }
        | Command::Job { .. }
        | Command::JobAdd { .. }
        | Command::Goal { .. } => true,
        Command::Budget { lift } => lift.is_some(),
        Command::Discard { .. } => true,
        // A board pinned (or taken down) twice is the same board.
        Command::Board { .. } => false,
        // A card or a diff shows; a merge, a pull request or a keep acts.
        Command::Worktree { word, .. } => {
            word.is_some_and(|w| !matches!(w, clibot_gateway::command::WorktreeWord::Diff))
        }
        Command::Help { .. }
        | Command::Sessions
        | Command::Discover
        | Command::Pending
        | Command::Queue
        | Command::Whoami
        | Command::Status
        | Command::Screen { .. }
        | Command::Shot
        | Command::Get { .. }
        | Command::Last
        | Command::Pair { .. }
        | Command::History { .. }
        | Command::Rules
        | Command::Jobs
        | Command::Usage { .. } => false,
    }
}

/// Claims made by this process whose handling has not finished.
#[derive(Default)]
pub struct Claims {
    open: Mutex<Bounded<String, ()>>,
}

impl Claims {
    /// Whether to act on `msg`: its first claim (or a message without an id, which cannot be
    /// told from another). An older daemon without `ClaimOnce` is taken as a yes.
    pub async fn acquire(
        &self,
        c: &mut clibot_proto::Client,
        platform: &str,
        msg: &Inbound,
    ) -> Result<bool, tonic::Status> {
        let Some(key) = key(platform, msg) else {
            return Ok(true);
        };
        if self.lock().get(&key).is_some() {
            return Ok(true);
        }
        match c
            .claim_once(v1::ClaimOnceRequest { key: key.clone() })
            .await
        {
            Ok(r) if r.get_ref().fresh => {
                self.lock().insert(key, ());
                Ok(true)
            }
            Ok(_) => {
                eprintln!(
                    "clibot-gateway: {key} was handled before (handed over again after a restart); not acting on it twice"
                );
                Ok(false)
            }
            Err(s) if s.code() == tonic::Code::Unimplemented => Ok(true),
            Err(s) => Err(s),
        }
    }

    /// `msg` was handled: its claim is settled.
    pub fn done(&self, platform: &str, msg: &Inbound) {
        if let Some(key) = key(platform, msg) {
            self.lock().remove(&key);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bounded<String, ()>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, prompt: Option<&str>) -> Inbound {
        Inbound {
            chat: "-100".into(),
            user: "7".into(),
            user_name: "ann".into(),
            text: "!!keys y".into(),
            id: id.into(),
            prompt: prompt.map(str::to_string),
            group: true,
            topics: false,
            file: None,
            ack: None,
        }
    }

    #[test]
    fn keys_match_the_text_dedupe_key_and_buttons_use_their_callback_id() {
        assert_eq!(
            key("telegram", &msg("42", None)).as_deref(),
            Some("telegram:-100:42")
        );
        assert_eq!(
            key("telegram", &msg("cb9", Some("p1"))).as_deref(),
            Some("telegram-cb:cb9")
        );
        assert_eq!(key("discord", &msg("", None)), None);
    }
}
