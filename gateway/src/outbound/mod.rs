//! Daemon events → chats: the relay and each chat's ordered, acknowledged delivery, how an
//! event is worded, a running turn's status message, files, pictures and long replies out, the
//! queue replies to chat messages go through, each chat's board, and events the relay cannot
//! read. It may use
//! `platforms/`, `ops/` and `bounded.rs`, never `inbound/` (which uses it) nor `machines.rs`.

pub mod blob;
pub mod board;
pub mod chat_delivery;
pub mod egress;
pub mod files;
pub mod home_topic;
pub mod picture;
pub mod poison;
pub mod relay;
pub mod render;
pub mod turn_status;
