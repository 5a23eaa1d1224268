//! `!!worktree NAME`: a session's worktree on a card — branch, base, what it holds — with
//! **Diff**, **Merge**, **Open PR**, **Keep** and **Discard**; a merge that stops on a
//! conflict gets a card of its own with **Ask the agent to resolve**. The cards carry only the
//! session's name: each press asks the daemon, which checks the presser may finish that
//! worktree and audits what was done. Discard never acts from a button: it says what would
//! be lost and asks for the name typed back (`!!discard NAME`).

use clibot_gateway::command::WorktreeWord;
use clibot_proto::v1;
use v1::WorktreeAction as A;

use super::Router;
use crate::platforms::Inbound;

/// The pseudo prompt id of a worktree card's buttons: `w.NAME`.
pub(crate) const WORKTREE_CARD: &str = "w.";
/// A merge's conflict card (**Ask the agent to resolve**): `wc.NAME`.
pub(crate) const CONFLICT_CARD: &str = "wc.";
/// The **Isolate** offer under a new session's reply: `wi.NAME`.
pub(crate) const ISOLATE_CARD: &str = "wi.";

/// Whether a pressed button's prompt id is one of these cards'.
pub(crate) fn is_worktree_card(id: &str) -> bool {
    [WORKTREE_CARD, CONFLICT_CARD, ISOLATE_CARD]
        .iter()
        .any(|p| id.starts_with(p))
}

const BUTTONS: [&str; 5] = ["Diff", "Merge", "Open PR", "Keep", "Discard"];

/// How a worktree stands: branch, base, commits ahead and behind, files not committed.
pub(super) fn standing(w: &v1::Worktree) -> String {
    let state = if w.missing {
        "its folder is gone (removed by hand)".to_string()
    } else {
        format!(
            "{} commit(s) ahead, {} behind, {} file(s) not committed",
            w.ahead, w.behind, w.dirty
        )
    };
    format!("on {} from {}: {state}", w.branch, w.base)
}

/// How a kept worktree stands, for its card.
fn card_text(k: &v1::KeptWorktree) -> String {
    let w = k.worktree.clone().unwrap_or_default();
    let mut t = format!(
        "🌿 {} ({}) {}",
        k.session,
        if k.running { "running" } else { "stopped" },
        standing(&w)
    );
    if !k.pr_url.is_empty() {
        t.push_str(&format!("\npull request: {}", k.pr_url));
    }
    t
}

impl Router {
    /// `!!worktree [NAME] [WORD [ARG]]`: the card, an action, or (no name, none bound) the
    /// worktrees the user may finish.
    pub(super) async fn worktree_command(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        name: Option<String>,
        word: Option<WorktreeWord>,
        arg: Option<String>,
    ) -> Result<Option<String>, tonic::Status> {
        let list = |session: String| v1::WorktreeRequest {
            session,
            action: A::List as i32,
            ..Default::default()
        };
        let Some(name) = name else {
            let r = c
                .worktree(self.req(msg, list(String::new())))
                .await?
                .into_inner();
            if r.worktrees.is_empty() {
                return Ok(Some(format!(
                    "no worktrees ({}new NAME CLI DIR wt starts a session in one)",
                    self.parser.prefix()
                )));
            }
            let lines: Vec<String> = r.worktrees.iter().map(card_text).collect();
            return Ok(Some(lines.join("\n")));
        };
        let arg = arg.unwrap_or_default();
        let (action, file, into) = match word {
            None => {
                let r = c
                    .worktree(self.req(msg, list(name.clone())))
                    .await?
                    .into_inner();
                let Some(k) = r.worktrees.first() else {
                    return Ok(Some(format!("{name} has no worktree of clibot's")));
                };
                let id = format!("{WORKTREE_CARD}{name}");
                return Ok(self.send_card(msg, &id, card_text(k), &BUTTONS).await);
            }
            Some(WorktreeWord::Diff) => (A::Diff, arg, String::new()),
            Some(WorktreeWord::Merge) => (A::Merge, String::new(), arg),
            Some(WorktreeWord::Pr) => (A::Pr, String::new(), String::new()),
            Some(WorktreeWord::Keep) => (A::Keep, String::new(), String::new()),
        };
        let req = v1::WorktreeRequest {
            session: name,
            action: action as i32,
            file,
            into,
            ..Default::default()
        };
        self.worktree_do(c, msg, req).await
    }

    /// A press on a worktree card (`w.NAME`, buttons 1–5) or a conflict card (`wc.NAME`).
    pub(super) async fn worktree_answer(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        prompt: &str,
        choice: &str,
    ) -> Result<Option<String>, tonic::Status> {
        let (name, action) = if let Some(name) = prompt.strip_prefix(CONFLICT_CARD) {
            (name, A::Resolve)
        } else if let Some(name) = prompt.strip_prefix(ISOLATE_CARD) {
            (name, A::Isolate)
        } else {
            let name = prompt.strip_prefix(WORKTREE_CARD).unwrap_or_default();
            let action = match choice {
                "1" => A::Diff,
                "2" => A::Merge,
                "3" => A::Pr,
                "4" => A::Keep,
                // Discard: what it would delete, and how to confirm (the daemon says).
                "5" => A::Discard,
                _ => return Ok(Some("that button is not one of clibot's".into())),
            };
            (name, action)
        };
        let req = v1::WorktreeRequest {
            session: name.to_string(),
            action: action as i32,
            ..Default::default()
        };
        self.worktree_do(c, msg, req).await
    }

    /// The reply to `!!new`: with an **Isolate** button when the daemon says the new session
    /// shares its repository with another or with changes not committed.
    pub(super) async fn isolate_offer(
        &self,
        msg: &Inbound,
        s: &v1::Session,
        text: String,
    ) -> Option<String> {
        if s.isolate.is_empty() {
            return Some(text);
        }
        let text = format!(
            "{text}\n⚠️ {}. Isolate starts {} again in a git worktree of its own (only before anything is typed into it).",
            s.isolate, s.name
        );
        let id = format!("{ISOLATE_CARD}{}", s.name);
        self.send_card(msg, &id, text, &["Isolate"]).await
    }

    /// Sends `text` (redacted) with a button per option under pseudo prompt `id`; the text
    /// itself when the card cannot be sent (a typed reply still reaches the chat).
    async fn send_card(
        &self,
        msg: &Inbound,
        id: &str,
        text: String,
        options: &[&str],
    ) -> Option<String> {
        let text = self.platform.redact(&text).into_owned();
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        match self
            .platform
            .send_prompt(&msg.chat, id, &text, &options)
            .await
        {
            Ok(_) => None,
            Err(_) => Some(text),
        }
    }

    /// `!!discard NAME`: the name typed is the confirmation.
    pub(super) async fn worktree_discard(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        name: String,
    ) -> Result<Option<String>, tonic::Status> {
        let req = v1::WorktreeRequest {
            session: name.clone(),
            action: A::Discard as i32,
            confirm: name,
            ..Default::default()
        };
        self.worktree_do(c, msg, req).await
    }

    /// Asks the daemon; a diff's patch goes as a file, a conflict gets its card.
    async fn worktree_do(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        req: v1::WorktreeRequest,
    ) -> Result<Option<String>, tonic::Status> {
        let name = req.session.clone();
        let discard = req.action == A::Discard as i32;
        let r = match c.worktree(self.req(msg, req)).await {
            Ok(r) => r.into_inner(),
            // Discard without the name: the daemon's words say what would go and how to confirm.
            Err(s) if discard && s.code() == tonic::Code::FailedPrecondition => {
                let p = self.parser.prefix();
                return Ok(Some(
                    s.message().replace("`!!discard", &format!("`{p}discard")),
                ));
            }
            Err(s) => return Err(s),
        };
        if !r.conflicts.is_empty() {
            let id = format!("{CONFLICT_CARD}{name}");
            return Ok(self
                .send_card(msg, &id, r.text, &["Ask the agent to resolve"])
                .await);
        }
        if !r.patch.is_empty() {
            let patch = String::from_utf8_lossy(&r.patch);
            let patch = self.platform.redact(&patch).into_owned();
            let summary = self.platform.redact(&r.text).into_owned();
            if let Err(e) = self
                .platform
                .send_file(&msg.chat, &format!("{name}.diff"), &patch, &summary)
                .await
            {
                return Ok(Some(format!(
                    "{summary}\n(the patch could not be sent: {e})"
                )));
            }
            return Ok(None);
        }
        Ok(Some(r.text))
    }
}
