//! Incoming chat messages: commands for the gateway, answers to a waiting prompt, and text for
//! the CLI of the session bound to the chat. Everything that matters is asked of, and kept in,
//! the daemon: access, bindings, sessions.

use std::sync::Arc;

use clibot_gateway::chunk::{ChunkOptions, Measure, file_summary, should_send_as_file};
use clibot_gateway::command::{Command, CommandParser, PromptAnswer, Route};
use clibot_proto::v1;
use tonic::Request;

use crate::inbound::claim::{self, Claims};
use crate::inbound::verified::Verified;
use crate::outbound::relay::lost;
use crate::platforms::{Inbound, Platform};

mod board_card;
mod choose;
mod commands;
mod files_in;
mod job_card;
mod worktree_card;

/// The pseudo-prompt id prefix of a `discover` button: `d.ID` adopts CLI ID.
pub(crate) const DISCOVERED: &str = "d.";

pub struct Router {
    pub platform: Arc<dyn Platform>,
    pub parser: CommandParser,
    /// (chat, user) pairs the daemon accepted: the only ones answered while it is away.
    pub verified: Arc<Verified>,
    /// Messages with side effects this process claimed (handled once, however often the
    /// platform hands them over).
    pub claims: Arc<Claims>,
    /// This daemon issues pairing codes (the only one, or the home one of several machines):
    /// elsewhere an unknown user is told to be added there, not given a code to pass on.
    pub issues_codes: bool,
    /// Messages waiting for their sender to pick a session.
    pub choosing: Arc<choose::Choosing>,
}

/// A message in a chat bound to a session its sender may not use.
pub const FOREIGN: &str =
    "this chat is bound to a session you may not use; ask its owner or an admin";

/// What a chat is bound to, as its sender sees it.
enum Bound {
    /// Nothing (and nothing was bound implicitly).
    Nothing,
    /// A session the sender may use.
    Usable(Box<v1::Binding>),
    /// A session the sender may not use (or one that is gone): it stays bound, and nothing of
    /// theirs goes to it.
    Foreign,
}

/// `!!screen` output longer than this many messages goes as a file.
const MAX_SCREEN_MESSAGES: usize = 3;

fn state_name(s: i32) -> &'static str {
    crate::outbound::board::state_word(s)
}

impl Router {
    /// A request on behalf of the message's sender (metadata names them unless the platform is
    /// local), so that the daemon checks and audits them.
    fn req<T>(&self, msg: &Inbound, body: T) -> Request<T> {
        let mut r = Request::new(body);
        if self.platform.is_local() {
            // The console is the machine's user: no chat identity, only its chat's name, for
            // its transcript.
            if let Ok(v) = msg.chat.parse() {
                r.metadata_mut().insert("clibot-chat", v);
            }
        } else {
            let md = r.metadata_mut();
            for (k, v) in [
                ("clibot-platform", self.platform.name()),
                ("clibot-user", &msg.user),
                ("clibot-chat", &msg.chat),
            ] {
                if let Ok(v) = v.parse() {
                    md.insert(k, v);
                }
            }
        }
        r
    }

    async fn reply(&self, msg: &Inbound, text: &str) {
        if let Err(e) = self
            .platform
            .send(&msg.chat, &self.platform.redact(text))
            .await
        {
            eprintln!("clibot-gateway: cannot reply to {}: {e}", msg.chat);
        }
    }

    /// Handles one message; errors become replies, except a lost daemon, which the caller
    /// handles by reconnecting and handling the message again.
    pub async fn handle(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<(), tonic::Status> {
        let routed = self.route(c, msg).await;
        if !matches!(&routed, Err(s) if lost(s)) {
            // Handled (a lost daemon has it handled again, and its claim still counts).
            self.claims.done(self.platform.name(), msg);
        }
        let text = match routed {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(()),
            Err(status) if lost(&status) => {
                return Err(status);
            }
            Err(status) if status.code() == tonic::Code::Internal => {
                // Its detail may name files on the machine (the state directory): the log
                // has it, the chat gets the gist.
                eprintln!(
                    "clibot-gateway: the daemon failed a request from {} chat {}: {}",
                    self.platform.name(),
                    msg.chat,
                    status.message()
                );
                "clibot could not do that (an error on the machine; its log says more)".into()
            }
            Err(status) => status.message().to_string(),
        };
        self.reply(msg, &text).await;
        Ok(())
    }

    async fn route(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<Option<String>, tonic::Status> {
        if !self.platform.is_local() {
            let check = v1::CheckAccessRequest {
                platform: self.platform.name().into(),
                user: msg.user.clone(),
                chat: msg.chat.clone(),
                user_name: msg.user_name.clone(),
                group: msg.group,
            };
            let a = c.check_access(check).await?.into_inner();
            if a.allowed {
                self.verified.accept(&msg.chat, &msg.user);
            } else {
                if self.verified.refuse(&msg.chat, &msg.user) {
                    eprintln!(
                        "clibot-gateway: {}: refused a message from user {} ({:?}) in chat {}: clibot does not know them (pairing: `clibotctl pair list`; or add the user to [access.{}] allow)",
                        self.platform.name(),
                        msg.user,
                        msg.user_name,
                        msg.chat,
                        self.platform.name()
                    );
                }
                if !self.issues_codes && !a.pairing_code.is_empty() {
                    return Ok(Some(format!(
                        "this machine does not know you: its owner adds you to [access.{}] allow in its config (pairing is done on the home machine)",
                        self.platform.name()
                    )));
                }
                // An empty message: stay silent (a stranger in a group, a group told once).
                return Ok((!a.message.is_empty()).then_some(a.message));
            }
        }
        let (binding, foreign) = match self.binding(c, msg).await? {
            Bound::Nothing => (None, false),
            Bound::Usable(b) => (Some(*b), false),
            Bound::Foreign => (None, true),
        };
        let bound = binding.as_ref().map(|b| b.session.clone());
        let (waiting, secret) = match &bound {
            Some(name) => c
                .get_session(v1::GetSessionRequest {
                    name: name.clone(),
                    ..Default::default()
                })
                .await
                .map(|s| {
                    let s = s.into_inner();
                    let secret = s.prompt.as_ref().is_some_and(v1::Prompt::is_secret);
                    (s.state == v1::SessionState::Waiting as i32, secret)
                })
                .unwrap_or((false, false)),
            None => (false, false),
        };
        // A file goes to the session, its caption with it.
        if let Some(file) = &msg.file {
            if foreign {
                return Ok(Some(self.foreign(c, msg).await?));
            }
            let Some(session) = bound else {
                return Ok(Some(self.no_session_hint(c, msg).await?));
            };
            if !self.claim(c, msg).await? {
                return Ok(None);
            }
            return self.file_in(c, msg, &session, file).await;
        }
        // A password prompt takes the message whole as its answer ("1" or "yes" too).
        let route = self.parser.route(&msg.text, waiting && !secret);
        match route {
            Route::Invalid(e) => Ok(Some(e.to_string())),
            Route::Command(cmd) => {
                if claim::has_effects(&cmd) && !self.claim(c, msg).await? {
                    return Ok(None);
                }
                self.command(c, msg, cmd, binding, foreign).await
            }
            Route::Answer(_) | Route::Cli(_) if foreign => Ok(Some(self.foreign(c, msg).await?)),
            Route::Answer(_) if !self.claim(c, msg).await? => Ok(None),
            Route::Answer(a) => {
                let answer = match a {
                    PromptAnswer::Choice(n) => n.to_string(),
                    PromptAnswer::Yes => "yes".into(),
                    PromptAnswer::No => "no".into(),
                };
                self.answer(c, msg, binding.as_ref(), answer).await?;
                Ok(None)
            }
            Route::Cli(text) => {
                let Some(session) = bound else {
                    return self.choose_session(c, msg, text).await;
                };
                let dedupe_key = if msg.id.is_empty() {
                    String::new()
                } else {
                    format!("{}:{}:{}", self.platform.name(), msg.chat, msg.id)
                };
                let req = v1::SendInputRequest {
                    session: session.clone(),
                    text: text.to_string(),
                    submit: true,
                    dedupe_key,
                };
                let r = c.send_input(self.req(msg, req)).await?.into_inner();
                if r.secret {
                    return Ok(Some(self.secret_sent(msg, &session).await));
                }
                Ok(r.queued.then(|| format!("[{session}] busy: your message is queued and goes in when the current turn ends")))
            }
        }
    }

    /// After a password went to a session: the message that carried it is deleted where the
    /// platform allows, and the chat is told what became of it.
    async fn secret_sent(&self, msg: &Inbound, session: &str) -> String {
        let deleted = if msg.id.is_empty() {
            Ok(false)
        } else {
            self.platform.delete_message(&msg.chat, &msg.id).await
        };
        match deleted {
            Ok(true) => format!(
                "🔒 [{session}] typed it; clibot keeps no copy, and your message was deleted"
            ),
            _ => format!(
                "🔒 [{session}] typed it; clibot keeps no copy. Delete your message: it holds the secret, and {} does not let the bot delete it here",
                self.platform.name()
            ),
        }
    }

    /// Whether to act on a message with side effects: not when it was acted on before (the
    /// platform handed it over again).
    async fn claim(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<bool, tonic::Status> {
        self.claims.acquire(c, self.platform.name(), msg).await
    }

    /// Sends a long text as a file named `name` (with a summary); `Some(text)` when it is short
    /// enough for messages.
    async fn maybe_file(&self, msg: &Inbound, name: &str, text: String) -> Option<String> {
        let opts = ChunkOptions::new(self.platform.max_message(), Measure::Chars);
        let text = self.platform.redact(&text).into_owned();
        if !should_send_as_file(&text, &opts, MAX_SCREEN_MESSAGES) {
            return Some(text);
        }
        let summary = file_summary(&text, 12, &ChunkOptions::new(1024, Measure::Utf16));
        if let Err(e) = self
            .platform
            .send_file(&msg.chat, name, &text, &summary)
            .await
        {
            eprintln!("clibot-gateway: cannot send {name} to {}: {e:#}", msg.chat);
        }
        None
    }

    /// `!!get`: the file read from the session's directory, sent unchanged — unless its text
    /// holds what the redactor takes for a secret (without `force`), or it is too large for
    /// the platform; what to say instead.
    async fn send_got(
        &self,
        msg: &Inbound,
        session: &str,
        path: &str,
        data: Vec<u8>,
        force: bool,
    ) -> Option<String> {
        let p = self.parser.prefix();
        if !force
            && crate::outbound::files::redacted_if_secret(self.platform.as_ref(), &data).is_some()
        {
            return Some(format!(
                "{path} holds what looks like a secret (a key, a token, a password): {p}get --force {path} sends it unchanged (admins)"
            ));
        }
        let name = crate::outbound::files::base_name(path);
        if let Some(why) =
            crate::outbound::files::too_large(self.platform.as_ref(), &name, data.len())
        {
            return Some(why);
        }
        let caption = format!("[{session}] {path}");
        match self
            .platform
            .send_bytes(&msg.chat, &name, &data, &caption)
            .await
        {
            Ok(()) => None,
            Err(e) => Some(format!("{name} could not be sent: {e}")),
        }
    }

    /// `!!shot`: the screen (with its escape sequences) drawn as a PNG and sent as a picture,
    /// its secrets redacted before it is drawn; what to say instead when it cannot be sent.
    async fn shot(&self, msg: &Inbound, session: &str, screen: &str) -> Option<String> {
        let png = match crate::outbound::picture::draw(self.platform.as_ref(), screen).await {
            Ok(png) => png,
            Err(e) => {
                return Some(format!(
                    "the picture could not be made ({e}): !!screen shows the text"
                ));
            }
        };
        let caption = format!("[{session}]");
        match self
            .platform
            .send_image(&msg.chat, "screen.png", &png, &caption)
            .await
        {
            Ok(()) => None,
            Err(e) => Some(format!("{e}")),
        }
    }

    /// Answers a prompt, always naming it: a button's own prompt; for a typed answer the
    /// prompt last shown in this chat (the daemon keeps it with the chat's binding), else —
    /// for a chat that was never shown one — the one the session shows now. The daemon refuses
    /// an answer to a prompt that is no longer waiting. True when it answered a password prompt.
    async fn answer(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        binding: Option<&v1::Binding>,
        answer: String,
    ) -> Result<bool, tonic::Status> {
        let (session, prompt_id) = match &msg.prompt {
            // The daemon finds the session that showed it.
            Some(id) => (String::new(), id.clone()),
            None => {
                let session = binding.map(|b| b.session.clone()).unwrap_or_default();
                let shown = binding.map(|b| b.shown_prompt.clone()).unwrap_or_default();
                let id = match shown {
                    id if !id.is_empty() => id,
                    _ => c
                        .get_session(v1::GetSessionRequest {
                            name: session.clone(),
                            ..Default::default()
                        })
                        .await?
                        .into_inner()
                        .prompt
                        .map(|p| p.id)
                        .unwrap_or_default(),
                };
                if id.is_empty() {
                    return Err(tonic::Status::failed_precondition(format!(
                        "{session} is not waiting for an answer"
                    )));
                }
                (session, id)
            }
        };
        let req = v1::AnswerPromptRequest {
            session,
            prompt_id,
            answer,
        };
        Ok(c.answer_prompt(self.req(msg, req))
            .await?
            .into_inner()
            .secret)
    }

    /// The chat's binding; for a chat with none, the only session this user may use (which
    /// becomes bound). A chat that is bound is never bound again implicitly, even when its
    /// session is one this user may not use (in a group, another member's): that would hand
    /// the group to whoever writes. A suspended binding resumes: the chat wrote, so it works
    /// again.
    async fn binding(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<Bound, tonic::Status> {
        let bindings = self.chat_bindings(c, msg).await?;
        let listed = c
            .list_sessions(self.req(msg, v1::ListSessionsRequest::default()))
            .await?
            .into_inner();
        let declared = v1::SessionState::Declared as i32;
        let sessions = listed.sessions;
        let again = match bindings.into_iter().next() {
            Some(b) if !sessions.iter().any(|s| s.name == b.session) => return Ok(Bound::Foreign),
            Some(b) if !b.broken => return Ok(Bound::Usable(Box::new(b))),
            Some(b) => b.session,
            // The general part of a chat with topics is for commands: sessions talk in their
            // own topics. A topic is one session's: with none bound (its session ended, its
            // name now another's), it is bound to nothing by itself.
            None if msg.topics || crate::platforms::topic::split(&msg.chat).1.is_some() => {
                return Ok(Bound::Nothing);
            }
            // `[daemon] default_session`, which the daemon names only to those who may use it;
            // declared and not started yet, it is started (by an admin) first.
            None if !listed.default_session.is_empty() => {
                let name = listed.default_session;
                if sessions
                    .iter()
                    .any(|s| s.name == name && s.state == declared)
                {
                    let req = v1::StartSessionRequest { name: name.clone() };
                    if let Err(e) = c.start_session(self.req(msg, req)).await {
                        if lost(&e) {
                            return Err(e);
                        }
                        return Ok(Bound::Nothing);
                    }
                }
                name
            }
            None => {
                let mut running = sessions.iter().filter(|s| s.state != declared);
                match (running.next(), running.next()) {
                    (Some(only), None) => only.name.clone(),
                    _ => return Ok(Bound::Nothing),
                }
            }
        };
        self.bind(c, msg, &again).await?;
        Ok(match self.chat_bindings(c, msg).await?.into_iter().next() {
            Some(b) => Bound::Usable(Box::new(b)),
            None => Bound::Nothing,
        })
    }

    /// The refusal for a chat bound to a session its sender may not use; in their own direct
    /// chat, with what they can do instead.
    async fn foreign(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<String, tonic::Status> {
        if msg.group {
            return Ok(FOREIGN.into());
        }
        Ok(format!(
            "{FOREIGN}\n{}",
            self.no_session_hint(c, msg).await?
        ))
    }

    async fn chat_bindings(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<Vec<v1::Binding>, tonic::Status> {
        let req = v1::ListBindingsRequest {
            platform: self.platform.name().into(),
            chat: msg.chat.clone(),
            session: String::new(),
            seq: 0,
        };
        Ok(c.list_bindings(req).await?.into_inner().bindings)
    }

    async fn bind(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        session: &str,
    ) -> Result<(), tonic::Status> {
        self.bind_chat(c, msg, &msg.chat, session).await
    }

    /// Binds chat `chat` (this message's chat, or a topic in it) to `session`, on behalf of
    /// the message's sender.
    async fn bind_chat(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        chat: &str,
        session: &str,
    ) -> Result<(), tonic::Status> {
        let req = v1::SetBindingRequest {
            platform: self.platform.name().into(),
            chat: chat.to_string(),
            session: session.into(),
            group: msg.group,
            from_seq: 0,
        };
        match c.set_binding(self.req(msg, req)).await {
            Ok(_) => Ok(()),
            // Who may bind a chat (a group: its admins and the session's owner) is the
            // daemon's call; its refusal says so plainly.
            Err(s) if s.code() == tonic::Code::PermissionDenied => {
                Err(tonic::Status::permission_denied(format!(
                    "this chat was not bound to {session}: {}",
                    s.message()
                )))
            }
            Err(s) => Err(s),
        }
    }

    /// Binds a session chosen in this chat: this chat, or — in the general part of a chat
    /// where sessions get topics — the session's own topic, opened (or reopened: the one it
    /// had in this chat) as needed. Says where the session talks now.
    async fn place(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        session: &str,
    ) -> Result<String, tonic::Status> {
        if !msg.topics {
            self.bind(c, msg, session).await?;
            return Ok("this chat now talks to it".into());
        }
        let req = v1::ListBindingsRequest {
            platform: self.platform.name().into(),
            chat: String::new(),
            session: session.into(),
            seq: 0,
        };
        let had = c
            .list_bindings(req)
            .await?
            .into_inner()
            .bindings
            .into_iter()
            .find(|b| !b.broken && crate::platforms::topic::is_in(&b.chat, &msg.chat));
        let topic = match had {
            Some(b) => {
                self.platform.reopen_topic(&b.chat).await;
                b.chat
            }
            None => {
                let topic = self
                    .platform
                    .open_topic(&msg.chat, session)
                    .await
                    .map_err(|e| {
                        tonic::Status::failed_precondition(format!(
                            "no topic could be opened for {session}: {e:#}"
                        ))
                    })?;
                self.bind_chat(c, msg, &topic, session).await?;
                let p = self.parser.prefix();
                let intro = format!(
                    "▶ {session}: what you write here goes to it; {p}help lists the commands"
                );
                if let Err(e) = self.platform.send(&topic, &intro).await {
                    eprintln!("clibot-gateway: cannot write in the new topic {topic}: {e:#}");
                }
                return Ok(format!("it talks in its own topic, {session}"));
            }
        };
        self.bind_chat(c, msg, &topic, session).await?;
        Ok(format!("it talks in its topic, {session}"))
    }

    async fn no_session_hint(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
    ) -> Result<String, tonic::Status> {
        if msg.topics {
            let p = self.parser.prefix();
            return Ok(format!(
                "here, each session talks in a topic of its own: {p}use NAME opens a session's topic, {p}new NAME CLI [DIR] starts one ({p}sessions lists them)"
            ));
        }
        let sessions = c
            .list_sessions(self.req(msg, v1::ListSessionsRequest::default()))
            .await?
            .into_inner()
            .sessions;
        let p = self.parser.prefix();
        Ok(if sessions.is_empty() {
            format!(
                "no sessions yet: start one with {p}new NAME CLI [DIR] (e.g. {p}new api claude ~/src/api)"
            )
        } else {
            let names: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
            format!(
                "which session? {p}use NAME — there are: {}",
                names.join(", ")
            )
        })
    }
}

/// Why an `!!answer` text is refused: it is typed into the CLI as an answer, so it must be one
/// line of plain text — a control character (Escape, Ctrl-C, a newline, a tab) would press a
/// key instead (keys are `!!keys`, which the daemon allows to fewer people).
pub fn answer_refusal(choice: &str) -> Option<String> {
    choice.chars().find(|c| c.is_control()).map(|c| {
        format!(
            "an answer is one line of plain text: it may not contain control characters (found U+{:04X}); nothing was typed",
            u32::from(c)
        )
    })
}

/// Longest text of one `!!history` line, in characters.
const HISTORY_LINE_CHARS: usize = 200;

/// A chat's transcript as `!!history` shows it: one line an entry, what the chat sent as
/// `› you: …`, what it was shown as `‹ [session] …`, each cut to about 200 characters.
/// Each entry is `redact`ed whole first: a secret cut in half (a private key without its
/// BEGIN line) or flattened onto one line is no longer recognised.
pub fn history_text(entries: &[v1::TranscriptEntry], redact: impl Fn(&str) -> String) -> String {
    entries
        .iter()
        .map(|e| {
            let flat = redact(&e.text)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let mut text: String = flat.chars().take(HISTORY_LINE_CHARS).collect();
            if flat.chars().count() > HISTORY_LINE_CHARS {
                text.push('…');
            }
            if e.dir == "in" {
                format!("› you: {text}")
            } else {
                format!("‹ [{}] {text}", e.session)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `40s`, `12m`, `3h 5m`.
pub(crate) fn age_words(secs: i64) -> String {
    match secs {
        ..60 => format!("{}s", secs.max(0)),
        60..3600 => format!("{}m", secs / 60),
        _ => format!("{}h {}m", secs / 3600, (secs % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    //! The router and the relay against an in-memory platform and a real daemon.

    #[test]
    fn history_lines_are_marked_by_direction_and_cut() {
        let e = |dir: &str, text: &str| clibot_proto::v1::TranscriptEntry {
            time_ms: 1,
            dir: dir.into(),
            user: "7".into(),
            session: "s".into(),
            text: text.into(),
        };
        let long = "x".repeat(500);
        let t = super::history_text(
            &[e("in", "echo\n hi"), e("out", "hi-2"), e("out", &long)],
            |t| clibot_gateway::redact(t).into_owned(),
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "› you: echo hi");
        assert_eq!(lines[1], "‹ [s] hi-2");
        assert_eq!(lines[2], format!("‹ [s] {}…", "x".repeat(200)));
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn answers_with_control_characters_are_refused() {
        for bad in [
            "yes\u{1b}[A",
            "1\r",
            "a\nb",
            "\u{3}",
            "x\ty",
            "\u{7f}",
            "ok\u{9b}2J",
        ] {
            let r = super::answer_refusal(bad).unwrap_or_default();
            assert!(r.contains("control characters"), "{bad:?}: {r}");
        }
        for good in [
            "2",
            "yes",
            "use the second approach",
            "是的，第二个",
            "ok 👍",
        ] {
            assert_eq!(super::answer_refusal(good), None, "{good:?}");
        }
    }

    #[test]
    fn history_redacts_each_entry_whole_before_cutting_it() {
        let body = [
            "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aumDSQ2hZnGxTgGQZzD0MX9pyf3c",
            "T8GHlL7xJ0pTAY8eqQ2hZnGxTgGQZzD0MX9pyf3cT8GHlL7xJ0pTAY8eq1c7+9z5Pa",
            "d7OejecsQ0bu3aumDSMIIEpAIBAAKCAQEAGQZzD0MX9pyf3cT8GHlL7xJ0pTAY8eqQ",
            "2hZnGxTgGQZzD0MX9pyf3cT8GHlL7xJ0pTAY8eqMIIEpAIBAAKCAQEA1c7+9z5Pad7",
        ];
        let key = format!(
            "$ cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n",
            body.join("\n")
        );
        assert!(key.chars().count() > 200);
        let entry = clibot_proto::v1::TranscriptEntry {
            time_ms: 1,
            dir: "out".into(),
            user: String::new(),
            session: "s".into(),
            text: key,
        };
        let t = super::history_text(&[entry], |t| clibot_gateway::redact(t).into_owned());
        for line in body {
            assert!(!t.contains(&line[..16]), "a key line leaked: {t}");
        }
        assert!(t.contains("…[redacted]"), "{t}");
        // Redacted with the gateway's own secrets too.
        let own = crate::platforms::redacting::redactor(["my-feishu-app-secret"]);
        let entry = clibot_proto::v1::TranscriptEntry {
            time_ms: 1,
            dir: "in".into(),
            user: "7".into(),
            session: "s".into(),
            text: format!("{} my-feishu-app-secret", "x ".repeat(95)),
        };
        let t = super::history_text(&[entry], |t| own.redact(t).into_owned());
        assert!(!t.contains("my-feishu"), "{t}");
    }

    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use async_trait::async_trait;
    use clibot_gateway::command::CommandParser;
    use clibot_tests::Harness;

    use super::Router;
    use crate::platforms::{Inbound, Platform};

    /// A platform that keeps what the bot says, per chat, in memory.
    #[derive(Default)]
    struct Memory {
        said: Mutex<Vec<(String, String)>>,
        local: bool,
    }

    #[async_trait]
    impl Platform for Memory {
        fn name(&self) -> &str {
            "telegram"
        }
        fn consumer(&self) -> String {
            "memory".into()
        }
        fn is_local(&self) -> bool {
            self.local
        }
        fn max_message(&self) -> usize {
            4096
        }
        async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
            self.said
                .lock()
                .expect("lock")
                .push((chat.to_string(), text.to_string()));
            Ok(())
        }
    }

    impl Memory {
        async fn wait_for(&self, chat: &str, needle: &str) -> String {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let found = self
                    .said
                    .lock()
                    .expect("lock")
                    .iter()
                    .find(|(c, t)| c == chat && t.contains(needle))
                    .map(|(_, t)| t.clone());
                if let Some(t) = found {
                    return t;
                }
                assert!(
                    Instant::now() < deadline,
                    "never said {needle:?} to {chat}: {:?}",
                    self.said.lock().expect("lock")
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    fn msg(chat: &str, user: &str, text: &str) -> Inbound {
        Inbound {
            chat: chat.into(),
            user: user.into(),
            user_name: user.into(),
            text: text.into(),
            id: String::new(),
            prompt: None,
            group: false,
            topics: false,
            file: None,
            ack: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commands_text_and_replies_through_an_in_memory_platform() {
        let mut h = Harness::with_config("\n[access.telegram]\nadmins = [\"7\"]\n");
        h.start_daemon();
        let memory = Arc::new(Memory::default());
        let platform: Arc<dyn Platform> = memory.clone();
        tokio::spawn(crate::outbound::relay::run(
            platform.clone(),
            clibot_proto::Target::Socket(h.socket.clone()),
            crate::ops::health::Health::default().platform("telegram"),
            None,
        ));
        let router = Router {
            platform,
            parser: CommandParser::default(),
            verified: Default::default(),
            claims: Default::default(),
            issues_codes: true,
            choosing: Default::default(),
        };
        let mut c = h.client().await;
        let work = h.work.display().to_string();

        // Nothing yet: the router says how to start.
        router
            .handle(&mut c, &msg("1", "7", "hello"))
            .await
            .expect("handled");
        memory.wait_for("1", "no sessions yet").await;
        router
            .handle(&mut c, &msg("1", "7", "!!status"))
            .await
            .expect("handled");
        let told = memory.wait_for("1", "no session chosen").await;
        assert!(
            told.contains("!!use NAME") && told.contains("!!new NAME CLI"),
            "{told}"
        );
        // A stranger gets a pairing code, not a session.
        router
            .handle(&mut c, &msg("2", "99", &format!("!!new x bash {work}")))
            .await
            .expect("handled");
        memory.wait_for("2", "pairing code").await;
        // Only the accepted sender counts as verified (answered while the daemon is away).
        assert!(router.verified.contains("1", "7"));
        assert!(!router.verified.contains("2", "99"));
        // The admin starts one; text goes to its CLI and the reply comes back through the relay.
        router
            .handle(&mut c, &msg("1", "7", &format!("!!new m bash {work}")))
            .await
            .expect("handled");
        memory.wait_for("1", "started m").await;
        router
            .handle(&mut c, &msg("1", "7", "echo mem-$((40+2))"))
            .await
            .expect("handled");
        memory.wait_for("1", "[m] mem-42").await;
        router
            .handle(&mut c, &msg("1", "7", "!!status"))
            .await
            .expect("handled");
        memory.wait_for("1", "m (bash)").await;
        router
            .handle(&mut c, &msg("1", "7", "!!bogus"))
            .await
            .expect("handled");
        memory.wait_for("1", "unknown command").await;
        // A refusal is worded for a chat: chat commands, not clibotctl ones.
        router
            .handle(&mut c, &msg("1", "7", "!!use nothere"))
            .await
            .expect("handled");
        let told = memory.wait_for("1", "no session named").await;
        assert!(
            told.contains("!!sessions") && !told.contains("clibotctl"),
            "{told}"
        );
        assert_eq!(
            h.ctl_ok(&["list", "--json"]).matches("\"name\"").count(),
            1,
            "the stranger started nothing"
        );
    }
}
