//! Who may keep a chat bound to a session: a binding records who made it, and a chat whose
//! binder may no longer use the session (a share taken back, an allowlist entry or a pairing
//! removed) is told once and then receives nothing more of it.

/// Why a binding delivers nothing now, if it does not.
pub enum Hold {
    /// Bound by someone unknown (a group bound before binders were recorded): suspended until
    /// an allowed user writes there.
    NoBinder,
}
