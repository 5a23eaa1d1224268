//! Identifiers the daemon makes: session ids, the UUIDs some CLIs take for their conversation.

use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh random-looking id: time plus process and counter entropy, hex. Unique per daemon
/// state dir, which is all it needs to be.
pub(crate) fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut x =
        (t as u64) ^ ((std::process::id() as u64) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64 finaliser: spreads the bits so ids do not share long prefixes.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    format!("{x:016x}")
}

/// A random version-4 UUID (for CLIs that take a session id chosen up front).
pub(crate) fn new_uuid() -> String {
    let a = u64::from_str_radix(&new_id(), 16).unwrap_or(0);
    let b = u64::from_str_radix(&new_id(), 16).unwrap_or(0);
    let a = (a & 0xffff_ffff_ffff_0fff) | 0x4000;
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// 128 bits from the operating system's CSPRNG, as 32 hex digits: hook tokens and the
/// passwords of CLIs' local servers. Falls back to nothing weaker: a failure is an error.
pub fn new_token() -> std::io::Result<String> {
    let mut buf = [0u8; 16];
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares a presented secret with the expected one in time that does not depend on where
/// they differ. An empty expected secret never matches.
pub fn token_eq(expected: &str, presented: &str) -> bool {
    let (a, b) = (expected.as_bytes(), presented.as_bytes());
    if a.is_empty() || a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
