//! `!!board [off]`: this chat's board — one message, pinned, that the keeper
//! (`outbound/board.rs`) edits as things change. A chat has one: asked again, the same message
//! is drawn and pinned again, never sent anew. Its buttons run `!!pending`, `!!screen`,
//! `!!jobs` and `!!usage` for whoever presses them.

use clibot_gateway::command::{Command, UsageSpan};
use clibot_proto::v1;

use super::Router;
use crate::outbound::board;
use crate::platforms::Inbound;

impl Router {
    /// Pins this chat's board (drawn now), or takes it down.
    pub(super) async fn board_command(
        &self,
        c: &mut clibot_proto::Client,
        msg: &Inbound,
        off: bool,
    ) -> Result<Option<String>, tonic::Status> {
        use v1::BoardAction as A;
        let ask = |action: A, message_id: String| v1::BoardRequest {
            action: action as i32,
            message_id,
            ..Default::default()
        };
        if off {
            let old = c
                .board(self.req(msg, ask(A::Off, String::new())))
                .await?
                .into_inner()
                .boards;
            let Some(b) = old.first() else {
                return Ok(Some("this chat has no board".into()));
            };
            let _ = self.platform.pin(&msg.chat, &b.message_id, false).await;
            let _ = self.platform.remove_buttons(&msg.chat, &b.message_id).await;
            return Ok(Some("📋 board taken down".into()));
        }
        let had = c
            .board(self.req(msg, ask(A::List, String::new())))
            .await?
            .into_inner()
            .boards;
        let platform = self.platform.name().to_string();
        let mut drawn = v1::Board {
            platform: platform.clone(),
            chat: msg.chat.clone(),
            user: format!("{platform}:{}", msg.user),
            ..Default::default()
        };
        let text = self
            .platform
            .redact(&board::draw(c, &platform, &drawn).await?)
            .into_owned();
        let existing = had.into_iter().next().map(|b| b.message_id);
        let edited = match &existing {
            Some(id) => self
                .platform
                .edit_prompt(&msg.chat, id, board::BOARD_CARD, &text, &board::buttons())
                .await
                .is_ok(),
            None => false,
        };
        let id = match (existing, edited) {
            (Some(id), true) => id,
            // None yet, or the old one is gone (deleted by hand): a new message.
            _ => {
                let sent = self
                    .platform
                    .send_prompt(&msg.chat, board::BOARD_CARD, &text, &board::buttons())
                    .await
                    .map_err(|e| {
                        tonic::Status::unavailable(format!("the board was not sent: {e:#}"))
                    })?;
                sent.ok_or_else(|| {
                    tonic::Status::failed_precondition(format!(
                        "{platform} cannot keep a message up to date here"
                    ))
                })?
            }
        };
        drawn.message_id = id.clone();
        c.board(self.req(msg, ask(A::Set, id.clone()))).await?;
        Ok(Some(match self.platform.pin(&msg.chat, &id, true).await {
            Ok(()) => format!(
                "📋 board pinned; it stays up to date ({}board off takes it down)",
                self.parser.prefix()
            ),
            Err(e) => format!(
                "📋 board up to date above, but not pinned ({e:#}): let the bot pin messages here, or pin it yourself"
            ),
        }))
    }

    /// A press on a board's button: the command it names, for the presser.
    pub(super) fn board_press(choice: &str) -> Option<Command> {
        Some(match choice {
            "1" => Command::Pending,
            "2" => Command::Screen { lines: None },
            "3" => Command::Jobs,
            "4" => Command::Usage {
                span: UsageSpan::Day,
            },
            _ => return None,
        })
    }
}
