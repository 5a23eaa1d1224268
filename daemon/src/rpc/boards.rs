//! Boards: the pinned message the gateway keeps edited per chat. Translation only: a chat user
//! sets or turns off their own chat's board; the machine's user (the gateway) lists a
//! platform's.

use super::*;
use crate::chat::boards::Board;

pub(super) fn board(
    svc: &Service,
    req: Request<v1::BoardRequest>,
) -> Result<Response<v1::BoardResponse>, Status> {
    use v1::BoardAction as A;
    let actor = actor(&req);
    let r = req.into_inner();
    let boards = &svc.boards;
    let own_chat = || -> Result<(), Status> {
        if actor.is_local() || actor.chat.is_empty() {
            return Err(Status::invalid_argument(
                "a board belongs to a chat: turn it on from the chat with !!board",
            ));
        }
        Ok(())
    };
    let listed = match A::try_from(r.action).unwrap_or(A::Unspecified) {
        A::List if actor.is_local() => boards.list(&r.platform, None),
        A::List => boards.list(&actor.platform, Some(&actor.chat)),
        A::Set => {
            own_chat()?;
            let b = Board {
                platform: actor.platform.clone(),
                chat: actor.chat.clone(),
                message_id: r.message_id,
                user: actor.key(),
                since_ms: crate::store::now_ms(),
            };
            let result = boards.set(b.clone());
            let refused = result.as_ref().err().map(ToString::to_string);
            svc.daemon
                .audit(&actor, "", "board", refused.as_deref().map_or(Ok(()), Err));
            result.map_err(|e| Status::failed_precondition(e.to_string()))?;
            vec![b]
        }
        A::Off => {
            own_chat()?;
            let old = boards
                .off(&actor.platform, &actor.chat)
                .map_err(|e| Status::unavailable(e.to_string()))?;
            svc.daemon.audit(&actor, "", "board off", Ok(()));
            old.into_iter().collect()
        }
        A::Unspecified => return Err(Status::invalid_argument("say LIST, SET or OFF")),
    };
    Ok(Response::new(v1::BoardResponse {
        boards: listed
            .into_iter()
            .map(|b| v1::Board {
                platform: b.platform,
                chat: b.chat,
                message_id: b.message_id,
                user: b.user,
                since_ms: b.since_ms,
            })
            .collect(),
    }))
}
