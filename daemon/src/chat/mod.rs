//! Chats and the people in them: who may use clibot (allowlists, pairing, admins), which chat
//! is bound to which session and how far its delivery got, what each chat sent and was shown,
//! the ids of messages already taken, and each chat's board message. The daemon's operations drive these tables; nothing
//! here reaches back into them.

pub mod access;
pub mod bind_rights;
pub mod boards;
pub mod chats;
pub mod dedupe;
pub mod transcript;
