//! Who may act from a chat platform: per-platform policy (pairing, allowlist, open, disabled),
//! allowlists and admins from the config, and pairing — an unknown user gets a one-time code and
//! nothing of theirs runs until the owner approves it (`clibotctl pairing approve CODE`).
//!
//! The decisions live in the daemon (not in the gateway) so that they survive gateway restarts
//! and `clibotctl` can manage them. Approved pairings are persisted in `access.json`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::store::{now_ms, set_aside, write_atomic};

/// How long a pairing code is valid.
pub const PAIRING_TTL_MS: i64 = 60 * 60 * 1000;
/// Pending codes per platform at most; more requests are refused until some expire.
pub const MAX_PENDING: usize = 3;
/// Code alphabet: no 0/O, 1/I/L look-alikes.
const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// A platform's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Unknown users get a pairing code; the owner approves it.
    #[default]
    Pairing,
    /// Only listed users.
    Allowlist,
    /// Anyone (for a private bot in a private group).
    Open,
    /// Nobody.
    Disabled,
}

/// `[access.PLATFORM]`
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlatformAccess {
    pub policy: Policy,
    /// User ids allowed to act.
    pub allow: Vec<String>,
    /// User ids that may also create and stop sessions and send control keys.
    pub admins: Vec<String>,
    /// Group chats (Discord: channel ids) where the bot works besides direct messages. In any
    /// other group nothing runs and no session output is sent.
    pub groups: Vec<String>,
}

/// The outcome of an access check.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allowed {
        admin: bool,
    },
    /// Not (yet) allowed; `code` is set when a pairing code was issued or is pending.
    Denied {
        reason: String,
        code: Option<String>,
    },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Approved {
    platform: String,
    user: String,
    #[serde(default)]
    name: String,
    approved_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Pending {
    pub code: String,
    pub platform: String,
    pub user: String,
    #[serde(default)]
    pub name: String,
    pub created_ms: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct AccessFile {
    #[serde(default)]
    approved: Vec<Approved>,
    #[serde(default)]
    pending: Vec<Pending>,
}

/// Why an access change failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AccessError {
    #[error(
        "no pending pairing with code {0:?}: codes expire after an hour; see `clibotctl pairing list`"
    )]
    UnknownCode(String),
    #[error("{platform} user {user} has no approved pairing: see `clibotctl pairing list`")]
    NotPaired { platform: String, user: String },
}

/// Access state. Cheap to share behind the daemon's `Arc`.
pub struct Access {
    config: BTreeMap<String, PlatformAccess>,
    path: PathBuf,
    state: Mutex<AccessFile>,
    /// Groups already told that they are not enabled.
    told_groups: Mutex<std::collections::HashSet<String>>,
}

fn random_code() -> String {
    let mut bytes = [0u8; 8];
    // /dev/urandom is always there on Linux; the fallback only weakens unpredictability.
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        let seed = now_ms() as u64 ^ (u64::from(std::process::id()) << 32);
        bytes = seed.to_le_bytes();
    }
    bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Normalises a code as a person may type it ("abcd-efgh" → "ABCDEFGH").
pub fn normalize_code(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

impl Access {
    /// Loads `access.json` from the state directory; an unreadable file is set aside and
    /// reported (approvals then have to be given again), never fatal.
    pub fn open(
        state_dir: &Path,
        config: BTreeMap<String, PlatformAccess>,
    ) -> (Access, Vec<String>) {
        let path = state_dir.join("access.json");
        let mut warnings = Vec::new();
        let state = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                let kept = set_aside(&path).map(|p| p.display().to_string()).unwrap_or_default();
                warnings.push(format!("access file {} is corrupt ({e}); kept at {kept}; pairings must be approved again", path.display()));
                AccessFile::default()
            }),
            Err(_) => AccessFile::default(),
        };
        (
            Access {
                config,
                path,
                state: Mutex::new(state),
                told_groups: Mutex::default(),
            },
            warnings,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AccessFile> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, state: &AccessFile) {
        match serde_json::to_vec_pretty(state) {
            Ok(data) => {
                if let Err(e) = write_atomic(&self.path, &data) {
                    tracing::error!(path = %self.path.display(), "cannot save access state: {e}");
                }
            }
            Err(e) => tracing::error!("cannot encode access state: {e}"),
        }
    }

    /// The platform's configuration (defaults: pairing, nobody listed).
    pub fn platform(&self, platform: &str) -> PlatformAccess {
        self.config.get(platform).cloned().unwrap_or_default()
    }

    /// What `user` may do without issuing anything: `Some(admin)` when allowed, `None` when
    /// not (yet). Used in groups, where strangers get no pairing code.
    pub fn known(&self, platform: &str, user: &str) -> Option<bool> {
        let conf = self.platform(platform);
        if conf.policy == Policy::Disabled {
            return None;
        }
        if conf.admins.iter().any(|a| a == user) {
            return Some(true);
        }
        let paired = self
            .lock()
            .approved
            .iter()
            .any(|a| a.platform == platform && a.user == user);
        (paired || conf.allow.iter().any(|a| a == user) || conf.policy == Policy::Open)
            .then_some(false)
    }

    /// Whether a group chat is enabled in `[access.PLATFORM] groups`.
    pub fn group_enabled(&self, platform: &str, chat: &str) -> bool {
        self.config
            .get(platform)
            .is_some_and(|c| c.groups.iter().any(|g| g == chat))
    }

    /// Whether the group `chat` should be told (once per daemon run) that it is not enabled.
    pub fn first_refusal_in_group(&self, platform: &str, chat: &str) -> bool {
        self.told_groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(format!("{platform}:{chat}"))
    }

    /// Decides whether `user` on `platform` may act; under the pairing policy an unknown user
    /// gets (or keeps) a one-time code.
    pub fn check(&self, platform: &str, user: &str, name: &str) -> Decision {
        let conf = self.platform(platform);
        if conf.policy == Policy::Disabled {
            return Decision::Denied {
                reason: format!("clibot is disabled on {platform}"),
                code: None,
            };
        }
        if conf.admins.iter().any(|a| a == user) {
            return Decision::Allowed { admin: true };
        }
        let mut st = self.lock();
        let now = now_ms();
        let before = st.pending.len();
        st.pending.retain(|p| now - p.created_ms < PAIRING_TTL_MS);
        let mut changed = st.pending.len() != before;
        let paired = st
            .approved
            .iter()
            .any(|a| a.platform == platform && a.user == user);
        let decision = if conf.allow.iter().any(|a| a == user)
            || paired
            || conf.policy == Policy::Open
        {
            Decision::Allowed { admin: false }
        } else if conf.policy == Policy::Allowlist {
            Decision::Denied {
                reason: format!(
                    "you are not on the allowlist; ask the owner to add your {platform} id {user}"
                ),
                code: None,
            }
        } else if let Some(p) = st
            .pending
            .iter()
            .find(|p| p.platform == platform && p.user == user)
        {
            Decision::Denied {
                reason: pairing_message(&p.code),
                code: Some(p.code.clone()),
            }
        } else if st.pending.iter().filter(|p| p.platform == platform).count() >= MAX_PENDING {
            Decision::Denied {
                reason: "too many pairing requests are waiting; try again in an hour".into(),
                code: None,
            }
        } else {
            let mut code = random_code();
            while st.pending.iter().any(|p| p.code == code) {
                code = random_code();
            }
            st.pending.push(Pending {
                code: code.clone(),
                platform: platform.into(),
                user: user.into(),
                name: name.into(),
                created_ms: now,
            });
            changed = true;
            Decision::Denied {
                reason: pairing_message(&code),
                code: Some(code),
            }
        };
        if changed {
            self.save(&st);
        }
        decision
    }

    /// Pending pairing requests (unexpired).
    pub fn pending(&self) -> Vec<Pending> {
        let now = now_ms();
        self.lock()
            .pending
            .iter()
            .filter(|p| now - p.created_ms < PAIRING_TTL_MS)
            .cloned()
            .collect()
    }

    /// Approved users, as (platform, user, name).
    pub fn approved(&self) -> Vec<(String, String, String)> {
        self.lock()
            .approved
            .iter()
            .map(|a| (a.platform.clone(), a.user.clone(), a.name.clone()))
            .collect()
    }

    /// Approves a pending code; returns (platform, user).
    pub fn approve(&self, code: &str) -> Result<(String, String), AccessError> {
        let code = normalize_code(code);
        let now = now_ms();
        let mut st = self.lock();
        let i = st
            .pending
            .iter()
            .position(|p| p.code == code && now - p.created_ms < PAIRING_TTL_MS)
            .ok_or_else(|| AccessError::UnknownCode(code.clone()))?;
        let p = st.pending.remove(i);
        st.approved.push(Approved {
            platform: p.platform.clone(),
            user: p.user.clone(),
            name: p.name,
            approved_ms: now,
        });
        self.save(&st);
        Ok((p.platform, p.user))
    }

    /// Removes an approved pairing (or a pending code).
    pub fn revoke(&self, platform: &str, user: &str) -> Result<(), AccessError> {
        let mut st = self.lock();
        let before = st.approved.len() + st.pending.len();
        st.approved
            .retain(|a| !(a.platform == platform && a.user == user));
        st.pending
            .retain(|p| !(p.platform == platform && p.user == user));
        if st.approved.len() + st.pending.len() == before {
            return Err(AccessError::NotPaired {
                platform: platform.into(),
                user: user.into(),
            });
        }
        self.save(&st);
        Ok(())
    }
}

fn pairing_message(code: &str) -> String {
    // A code read from access.json may be of any length: split it only where it can be.
    let shown = match (code.get(..4), code.get(4..)) {
        (Some(head), Some(tail)) if !tail.is_empty() => format!("{head}-{tail}"),
        _ => code.to_string(),
    };
    format!(
        "this chat is not paired with clibot yet. Your pairing code is {shown}; the owner approves it on the machine with `clibotctl pairing approve {code}` (it expires in an hour)"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pairing_message_never_panics_on_an_odd_code() {
        for code in ["", "AB", "ABCD", "ABCDEFGH", "ÄÖÜ€x"] {
            let m = super::pairing_message(code);
            assert!(m.contains("pairing code is"), "{m}");
        }
        assert!(super::pairing_message("ABCDEFGH").contains("ABCD-EFGH"));
    }

    use super::*;

    fn access(dir: &Path, policy: Policy) -> Access {
        let mut c = BTreeMap::new();
        c.insert(
            "telegram".to_string(),
            PlatformAccess {
                policy,
                allow: vec!["42".into()],
                admins: vec!["1".into()],
                groups: vec![],
            },
        );
        Access::open(dir, c).0
    }

    #[test]
    fn pairing_flow() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(dir.path(), Policy::Pairing);
        assert_eq!(
            a.check("telegram", "1", ""),
            Decision::Allowed { admin: true }
        );
        assert_eq!(
            a.check("telegram", "42", ""),
            Decision::Allowed { admin: false }
        );
        let Decision::Denied {
            code: Some(code),
            reason,
        } = a.check("telegram", "7", "eve")
        else {
            panic!("code expected")
        };
        assert_eq!(code.len(), 8);
        assert!(code.bytes().all(|b| ALPHABET.contains(&b)), "{code}");
        assert!(reason.contains("clibotctl pairing approve"), "{reason}");
        // Asking again keeps the same code.
        assert!(
            matches!(a.check("telegram", "7", ""), Decision::Denied { code: Some(c), .. } if c == code)
        );
        // At most three pending per platform.
        a.check("telegram", "8", "");
        a.check("telegram", "9", "");
        assert!(matches!(
            a.check("telegram", "10", ""),
            Decision::Denied { code: None, .. }
        ));
        assert_eq!(a.pending().len(), 3);
        // Approval, typed loosely, persists across a restart.
        let dashed = format!("{}-{}", code[..4].to_lowercase(), &code[4..]);
        assert_eq!(a.approve(&dashed), Ok(("telegram".into(), "7".into())));
        assert_eq!(
            a.approve(&code),
            Err(AccessError::UnknownCode(code.clone()))
        );
        drop(a);
        let a = access(dir.path(), Policy::Pairing);
        assert_eq!(
            a.check("telegram", "7", ""),
            Decision::Allowed { admin: false }
        );
        a.revoke("telegram", "7").expect("revoke");
        assert!(matches!(
            a.check("telegram", "7", ""),
            Decision::Denied { .. }
        ));
        assert!(a.revoke("telegram", "nobody").is_err());
    }

    #[test]
    fn other_policies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(dir.path(), Policy::Allowlist);
        assert!(matches!(
            a.check("telegram", "7", ""),
            Decision::Denied { code: None, .. }
        ));
        assert!(a.pending().is_empty(), "no codes under an allowlist");
        let a = access(dir.path(), Policy::Open);
        assert_eq!(
            a.check("telegram", "7", ""),
            Decision::Allowed { admin: false }
        );
        let a = access(dir.path(), Policy::Disabled);
        assert!(
            matches!(a.check("telegram", "1", ""), Decision::Denied { .. }),
            "disabled even for admins"
        );
        // A platform without a section: pairing, nobody listed.
        assert!(matches!(
            a.check("discord", "5", ""),
            Decision::Denied { code: Some(_), .. }
        ));
    }

    #[test]
    fn expired_codes_are_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(dir.path(), Policy::Pairing);
        let Decision::Denied {
            code: Some(code), ..
        } = a.check("telegram", "7", "")
        else {
            panic!("code")
        };
        a.lock().pending[0].created_ms -= PAIRING_TTL_MS + 1;
        assert_eq!(a.approve(&code), Err(AccessError::UnknownCode(code)));
        assert!(a.pending().is_empty());
    }
}
