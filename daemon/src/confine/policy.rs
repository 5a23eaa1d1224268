//! The settings of non-admins' jails in `[access.PLATFORM]`: where members work
//! (`member_roots`), what more the jail shows (`jail_read`), its network, and how much it may
//! write (`jail_tmp`, `jail_disk`). The checks that keep a member out of the owner's files
//! live here too, so the config check and the spawn check are the same code.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `[access.PLATFORM] network`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// The machine's network for the AI CLIs (they reach their model's API), none for plain
    /// programs (`shell`, `bash`), which get a network of their own with only loopback.
    #[default]
    Auto,
    /// The machine's network for every program.
    On,
    /// No network for any program (an AI CLI then reaches no model API unless it is local to
    /// the jail).
    Off,
}

impl Network {
    /// Whether a program of `adapter` shares the machine's network.
    pub fn shared_for(self, adapter: &str) -> bool {
        match self {
            Network::On => true,
            Network::Off => false,
            Network::Auto => adapter != "generic",
        }
    }
}

/// A size in bytes, written `"512M"`, `"1G"`, `"10GiB"` or as a whole number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

/// Parses a size: a whole number with an optional unit K, M, G, T (powers of 1024; `KiB`,
/// `KB`, `k` are the same).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let help = "write a whole number of bytes or one with a unit: \"512M\", \"1G\", \"10GiB\"";
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size: {help}"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .trim_end_matches("ib")
        .trim_end_matches('b')
        .to_string();
    let shift = match unit.as_str() {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("{text:?} has an unknown unit: {help}")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text:?} is too large: {help}"))
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Bytes(n)),
            Raw::S(s) => parse_bytes(&s).map(Bytes).map_err(serde::de::Error::custom),
        }
    }
}

/// Bytes for people: "1 GiB", "512 MiB", "900 B".
pub fn format_bytes(n: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
        if n >= 1 << shift {
            return format!("{:.1} {unit}", n as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{n} B")
}

/// The default size of a jail's `/tmp`, `/var/tmp` and `/dev/shm`, each.
pub const DEFAULT_JAIL_TMP: u64 = 1 << 30;
/// The default of what a member's session may keep in its directory and home together.
pub const DEFAULT_JAIL_DISK: u64 = 10 << 30;

/// A member's own workspace below the data directory: `members/PLATFORM-USER`, the user id
/// made safe for a file name.
pub fn member_workspace(data_dir: &Path, platform: &str, user: &str) -> PathBuf {
    let safe: String = format!("{platform}-{user}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    data_dir.join("members").join(safe.trim_start_matches('.'))
}

pub use clibot_proto::members::unfit_root as unfit_member_root;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_as_people_write_them() {
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("10GiB"), Ok(10 << 30));
        assert_eq!(parse_bytes("2 kb"), Ok(2048));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("1X").is_err());
        assert!(parse_bytes("99999999999T").is_err());
        assert_eq!(format_bytes(1 << 30), "1 GiB");
        assert_eq!(format_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(format_bytes(12), "12 B");
    }

    #[test]
    fn a_members_workspace_is_named_safely() {
        assert_eq!(
            member_workspace(Path::new("/d"), "telegram", "../12 3"),
            PathBuf::from("/d/members/telegram-.._12_3")
        );
    }

    #[test]
    fn plain_programs_get_no_network_by_default() {
        assert!(Network::Auto.shared_for("claude"));
        assert!(!Network::Auto.shared_for("generic"));
        assert!(Network::On.shared_for("generic"));
        assert!(!Network::Off.shared_for("claude"));
    }
}
