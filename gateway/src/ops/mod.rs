//! How this gateway is doing: each platform's health, reported to the daemon every few
//! seconds, and the notices that tell the admins when a platform is down. It may use
//! `platforms/` and `progress.rs`, never `inbound/` or `outbound/` (both use its clock and
//! report).

pub mod down;
pub mod health;
