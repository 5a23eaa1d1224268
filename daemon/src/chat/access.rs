//! Who may act from a chat platform: per-platform policy (pairing, allowlist, open, disabled),
//! allowlists and admins from the config, and pairing — an unknown user gets a one-time code and
//! nothing of theirs runs until the owner approves it (`clibotctl pairing approve CODE`).
//!
//! The decisions live in the daemon (not in the gateway) so that they survive gateway restarts
//! and `clibotctl` can manage them. Approved pairings are persisted in `access.json`.
//!
//! Strangers are cheap: a refused user is answered at most once a minute (a pending pairing
//! code is told when issued, then at most every ten minutes); in between the answer is empty,
//! which the gateway takes as "stay silent". Pending codes are bounded per platform, the oldest
//! giving way to a new one, and a stranger asking again keeps their one code.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::store::{dropped_entries, now_ms, sane_field, set_aside, write_atomic};

/// How long a pairing code is valid, unless `[access.PLATFORM] pairing_ttl` says otherwise.
pub const DEFAULT_PAIRING_TTL: Duration = Duration::from_secs(60 * 60);
/// Pending codes per platform at most, unless `[access.PLATFORM] pairing_max_pending` says
/// otherwise; a new request then takes the place of the oldest.
pub const DEFAULT_MAX_PENDING: usize = 50;
/// The largest `pairing_max_pending` the config may set: the codes live in `access.json`.
pub const MAX_PENDING_LIMIT: usize = 10_000;
/// A refused user without a pairing code is answered at most this often.
pub const REFUSAL_REPLY_MS: i64 = 60 * 1000;
/// A pending pairing code is told when issued, then again at most this often.
pub const CODE_REMIND_MS: i64 = 10 * 60 * 1000;
/// Refused users whose last answer is remembered; beyond this the oldest are forgotten (they
/// may then be answered once more).
const TOLD_CAP: usize = 4096;
/// Display names kept with a pending code, in characters.
const NAME_CHARS: usize = 128;
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
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    /// Sessions one chat user may have running at once (admins are not capped).
    pub max_sessions_per_user: usize,
    /// How non-admins' sessions run: in a bubblewrap jail (the default), or, when an admin
    /// says so, unjailed (`doctor` warns).
    pub sandbox: Sandbox,
    /// The CLIs non-admins may start; unset: every configured CLI whose adapter is not
    /// `generic`; `["*"]`: all.
    pub clis: Option<Vec<String>>,
    /// How long a pairing code stays valid.
    #[serde(deserialize_with = "crate::duration::de_duration")]
    pub pairing_ttl: Duration,
    /// Pending pairing codes at most; a new request then takes the place of the oldest.
    pub pairing_max_pending: usize,
    /// Where non-admins' sessions may work; unset: a workspace of each member's own under
    /// the data directory (`members/PLATFORM-USER`), made on first use.
    pub member_roots: Option<Vec<PathBuf>>,
    /// More paths a non-admin's jail shows, read-only.
    pub jail_read: Vec<PathBuf>,
    /// Whether a non-admin's jail shares the machine's network.
    pub network: crate::confine::policy::Network,
    /// The size of a non-admin's jail's `/tmp`, `/var/tmp` and `/dev/shm`, each.
    pub jail_tmp: crate::confine::policy::Bytes,
    /// What a non-admin's session may keep in its directory and its own home together; over
    /// it, the session is stopped.
    pub jail_disk: crate::confine::policy::Bytes,
}

impl PlatformAccess {
    /// `pairing_ttl` in milliseconds, as the access file's times are.
    fn pairing_ttl_ms(&self) -> i64 {
        i64::try_from(self.pairing_ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// What is wrong with this section's values, naming the key; `platform` names the section.
    pub fn validate(&self, platform: &str) -> Result<(), String> {
        if self.pairing_ttl.is_zero() {
            return Err(format!(
                "[access.{platform}] pairing_ttl must be longer than 0, e.g. \"30m\" or \"2h\" (the default is \"1h\")"
            ));
        }
        if !(1..=MAX_PENDING_LIMIT).contains(&self.pairing_max_pending) {
            return Err(format!(
                "[access.{platform}] pairing_max_pending must be from 1 to {MAX_PENDING_LIMIT} (the default is {DEFAULT_MAX_PENDING}), not {}",
                self.pairing_max_pending
            ));
        }
        Ok(())
    }
}

/// `[access.PLATFORM] sandbox`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sandbox {
    #[default]
    Bwrap,
    Off,
}

impl Default for PlatformAccess {
    fn default() -> Self {
        PlatformAccess {
            policy: Policy::default(),
            allow: Vec::new(),
            admins: Vec::new(),
            groups: Vec::new(),
            max_sessions_per_user: 4,
            sandbox: Sandbox::default(),
            clis: None,
            pairing_ttl: DEFAULT_PAIRING_TTL,
            pairing_max_pending: DEFAULT_MAX_PENDING,
            member_roots: None,
            jail_read: Vec::new(),
            network: Default::default(),
            jail_tmp: crate::confine::policy::Bytes(crate::confine::policy::DEFAULT_JAIL_TMP),
            jail_disk: crate::confine::policy::Bytes(crate::confine::policy::DEFAULT_JAIL_DISK),
        }
    }
}

/// The outcome of an access check.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allowed {
        admin: bool,
    },
    /// Not (yet) allowed; `code` is set when a pairing code was issued or is pending. From
    /// [`Access::check_chat`], an empty `reason` means: answer nothing this time.
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
    #[serde(default)]
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
    /// The direct chat the code was given in: told there when it is approved.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chat: String,
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
        "no pending pairing with code {0:?}: it is mistyped, or it expired (after an hour, or as [access.PLATFORM] pairing_ttl says); see `clibotctl pairing list`"
    )]
    UnknownCode(String),
    #[error("{platform} user {user} has no approved pairing: see `clibotctl pairing list`")]
    NotPaired { platform: String, user: String },
}

/// Access state. Cheap to share behind the daemon's `Arc`.
pub struct Access {
    /// `[access.*]`, replaced whole by a reload.
    config: std::sync::RwLock<BTreeMap<String, PlatformAccess>>,
    path: PathBuf,
    state: Mutex<AccessFile>,
    /// False when `access.json` exists but could not be read: saving would overwrite it.
    writable: bool,
    /// Groups already told that they are not enabled.
    told_groups: Mutex<std::collections::HashSet<String>>,
    /// "PLATFORM\nUSER" → when that refused user was last answered.
    told: Mutex<HashMap<String, i64>>,
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
    /// Loads `access.json` from the state directory, never fatally. A file that is not JSON is
    /// set aside (approvals then have to be given again); an entry that cannot be used is
    /// dropped with a warning, the file as it was kept beside it; a file that cannot be read at
    /// all (permissions, I/O) is left alone and never overwritten while it stays so.
    pub fn open(
        state_dir: &Path,
        config: BTreeMap<String, PlatformAccess>,
    ) -> (Access, Vec<String>) {
        let path = state_dir.join("access.json");
        let mut warnings = Vec::new();
        let mut writable = true;
        let max_pending = |platform: &str| {
            config
                .get(platform)
                .map_or(DEFAULT_MAX_PENDING, |c| c.pairing_max_pending)
        };
        let state = match std::fs::read(&path) {
            Ok(b) => match parse(&b, &max_pending) {
                Ok((state, dropped)) => {
                    if !dropped.is_empty() {
                        warnings.push(dropped_entries(&path, "access file", &dropped));
                    }
                    state
                }
                Err(e) => {
                    let kept = set_aside(&path)
                        .map(|p| format!("kept at {}", p.display()))
                        .unwrap_or_else(|e| format!("could not be set aside: {e}"));
                    warnings.push(format!(
                        "access file {} is corrupt ({e}); {kept}; pairings must be approved again",
                        path.display()
                    ));
                    AccessFile::default()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => AccessFile::default(),
            Err(e) => {
                writable = false;
                warnings.push(format!(
                    "cannot read access file {} ({e}): approved pairings are not known and no pairing is saved until it can be read; make it readable by clibotd's user (chmod 600) and restart clibotd",
                    path.display()
                ));
                AccessFile::default()
            }
        };
        (
            Access {
                config: std::sync::RwLock::new(config),
                path,
                state: Mutex::new(state),
                writable,
                told_groups: Mutex::default(),
                told: Mutex::default(),
            },
            warnings,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AccessFile> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, state: &AccessFile) {
        if !self.writable {
            tracing::warn!(path = %self.path.display(), "access state not saved: the file could not be read at start");
            return;
        }
        match serde_json::to_vec_pretty(state) {
            Ok(data) => {
                if let Err(e) = write_atomic(&self.path, &data) {
                    tracing::error!(path = %self.path.display(), "cannot save access state: {e}");
                }
            }
            Err(e) => tracing::error!("cannot encode access state: {e}"),
        }
    }

    /// Every platform configured under `[access.*]`, by name.
    pub fn platforms(&self) -> Vec<(String, PlatformAccess)> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The platform's configuration (defaults: pairing, nobody listed).
    pub fn platform(&self, platform: &str) -> PlatformAccess {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(platform)
            .cloned()
            .unwrap_or_default()
    }

    /// How long a pairing code of `platform` stays valid, in milliseconds.
    fn ttl_ms(&self, platform: &str) -> i64 {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(platform)
            .map_or_else(
                || PlatformAccess::default().pairing_ttl_ms(),
                PlatformAccess::pairing_ttl_ms,
            )
    }

    /// Whether pending code `p` is still valid at `now`.
    fn live(&self, p: &Pending, now: i64) -> bool {
        now.saturating_sub(p.created_ms) < self.ttl_ms(&p.platform)
    }

    /// Replaces `[access.*]` (a reload): applies to every check from now on.
    pub fn set_config(&self, config: BTreeMap<String, PlatformAccess>) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = config;
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

    /// Whether a group chat is enabled in `[access.PLATFORM] groups`. A topic in a group
    /// (`CHAT/THREAD`: a forum topic, a thread) is enabled with its group.
    pub fn group_enabled(&self, platform: &str, chat: &str) -> bool {
        let group = group_of(chat);
        self.platform(platform).groups.iter().any(|g| g == group)
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
        self.check_at(platform, user, name, now_ms()).0
    }

    /// [`Self::check`] for a chat message, which a refused user may be answered: the reason is
    /// left empty (answer nothing) when this user was answered less than [`REFUSAL_REPLY_MS`]
    /// ago, or for a pending code less than [`CODE_REMIND_MS`] ago. Also says whether a pairing
    /// code was issued just now.
    pub fn check_chat(&self, platform: &str, user: &str, name: &str) -> (Decision, bool) {
        self.check_chat_at(platform, user, name, now_ms())
    }

    fn check_chat_at(&self, platform: &str, user: &str, name: &str, now: i64) -> (Decision, bool) {
        let (mut decision, issued) = self.check_at(platform, user, name, now);
        if let Decision::Denied { reason, code } = &mut decision {
            let every = if code.is_some() {
                CODE_REMIND_MS
            } else {
                REFUSAL_REPLY_MS
            };
            let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
            let key = format!("{platform}\n{user}");
            let due = issued || told.get(&key).is_none_or(|t| now - t >= every || now < *t);
            if due {
                if told.len() >= TOLD_CAP {
                    told.retain(|_, t| now - *t < CODE_REMIND_MS);
                    if told.len() >= TOLD_CAP {
                        told.clear();
                    }
                }
                told.insert(key, now);
            } else {
                reason.clear();
            }
        }
        (decision, issued)
    }

    /// The decision, and whether a pairing code was issued by this call.
    fn check_at(&self, platform: &str, user: &str, name: &str, now: i64) -> (Decision, bool) {
        let conf = self.platform(platform);
        if conf.policy == Policy::Disabled {
            return (
                Decision::Denied {
                    reason: format!("clibot is disabled on {platform}"),
                    code: None,
                },
                false,
            );
        }
        if !sane_field(platform, false) || !sane_field(user, false) {
            // Nothing the access file could keep: no code for it.
            return (
                Decision::Denied {
                    reason: "this user id cannot be used with clibot".into(),
                    code: None,
                },
                false,
            );
        }
        if conf.admins.iter().any(|a| a == user) {
            return (Decision::Allowed { admin: true }, false);
        }
        let mut st = self.lock();
        let before = st.pending.len();
        st.pending.retain(|p| self.live(p, now));
        let mut changed = st.pending.len() != before;
        let mut issued = false;
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
            // The time it has left, not its whole life.
            let left = conf
                .pairing_ttl_ms()
                .saturating_sub(now.saturating_sub(p.created_ms));
            Decision::Denied {
                reason: pairing_message(
                    &p.code,
                    Duration::from_millis(u64::try_from(left).unwrap_or(0)),
                ),
                code: Some(p.code.clone()),
            }
        } else {
            // Full: the oldest request of this platform gives way (its code stops working).
            while st.pending.iter().filter(|p| p.platform == platform).count()
                >= conf.pairing_max_pending.max(1)
            {
                let oldest = st
                    .pending
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.platform == platform)
                    .min_by_key(|(_, p)| p.created_ms)
                    .map(|(i, _)| i);
                match oldest {
                    Some(i) => drop(st.pending.remove(i)),
                    None => break,
                }
            }
            let mut code = random_code();
            while st.pending.iter().any(|p| p.code == code) {
                code = random_code();
            }
            st.pending.push(Pending {
                code: code.clone(),
                platform: platform.into(),
                user: user.into(),
                name: name
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(NAME_CHARS)
                    .collect(),
                created_ms: now,
                chat: String::new(),
            });
            changed = true;
            issued = true;
            Decision::Denied {
                reason: pairing_message(&code, conf.pairing_ttl),
                code: Some(code),
            }
        };
        if changed {
            self.save(&st);
        }
        (decision, issued)
    }

    /// Pending pairing requests (unexpired).
    pub fn pending(&self) -> Vec<Pending> {
        let now = now_ms();
        self.lock()
            .pending
            .iter()
            .filter(|p| self.live(p, now))
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

    /// Remembers the direct chat where `user` was given their pairing code.
    pub fn note_pairing_chat(&self, platform: &str, user: &str, chat: &str) {
        if chat.is_empty() || chat.len() > 128 || chat.chars().any(char::is_control) {
            return;
        }
        let mut st = self.lock();
        let Some(p) = st
            .pending
            .iter_mut()
            .find(|p| p.platform == platform && p.user == user && p.chat != chat)
        else {
            return;
        };
        p.chat = chat.to_string();
        self.save(&st);
    }

    /// Approves a pending code; returns (platform, user).
    pub fn approve(&self, code: &str) -> Result<(String, String), AccessError> {
        self.approve_in_chat(code).map(|(p, u, _)| (p, u))
    }

    /// [`Self::approve`], with the chat the code was given in (empty: unknown).
    pub fn approve_in_chat(&self, code: &str) -> Result<(String, String, String), AccessError> {
        let code = normalize_code(code);
        let now = now_ms();
        let mut st = self.lock();
        let i = st
            .pending
            .iter()
            .position(|p| p.code == code && self.live(p, now))
            .ok_or_else(|| AccessError::UnknownCode(code.clone()))?;
        let p = st.pending.remove(i);
        st.approved.push(Approved {
            platform: p.platform.clone(),
            user: p.user.clone(),
            name: p.name,
            approved_ms: now,
        });
        self.save(&st);
        Ok((p.platform, p.user, p.chat))
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

/// Parses `access.json` entry by entry: what cannot be used is dropped and described.
/// `max_pending` is each platform's cap on pending codes.
fn parse(
    bytes: &[u8],
    max_pending: &dyn Fn(&str) -> usize,
) -> Result<(AccessFile, Vec<String>), serde_json::Error> {
    let raw: serde_json::Value = serde_json::from_slice(bytes)?;
    let mut dropped = Vec::new();
    let mut st = AccessFile::default();
    let obj = match raw {
        serde_json::Value::Object(o) => o,
        other => {
            dropped.push(format!("the file holds {other} instead of an object"));
            return Ok((st, dropped));
        }
    };
    match obj.get("approved") {
        None => {}
        Some(serde_json::Value::Array(list)) => {
            for v in list {
                match serde_json::from_value::<Approved>(v.clone()) {
                    Ok(a)
                        if sane_field(&a.platform, false)
                            && sane_field(&a.user, false)
                            && sane_field(&a.name, true) =>
                    {
                        if st
                            .approved
                            .iter()
                            .any(|o| o.platform == a.platform && o.user == a.user)
                        {
                            dropped.push(format!("a second approval of {}:{}", a.platform, a.user));
                        } else {
                            st.approved.push(a);
                        }
                    }
                    Ok(_) => dropped.push(format!("approved {v} (empty or invalid fields)")),
                    Err(e) => dropped.push(format!("approved {v} ({e})")),
                }
            }
        }
        Some(_) => dropped.push("approved (not a list)".into()),
    }
    match obj.get("pending") {
        None => {}
        Some(serde_json::Value::Array(list)) => {
            for v in list {
                match serde_json::from_value::<Pending>(v.clone()) {
                    Ok(p)
                        if code_ok(&p.code)
                            && sane_field(&p.platform, false)
                            && sane_field(&p.user, false)
                            && sane_field(&p.name, true) =>
                    {
                        if st.pending.iter().any(|o| {
                            o.code == p.code || (o.platform == p.platform && o.user == p.user)
                        }) {
                            dropped.push(format!(
                                "a second pending code {} for {}:{}",
                                p.code, p.platform, p.user
                            ));
                        } else {
                            st.pending.push(p);
                        }
                    }
                    Ok(_) => dropped.push(format!("pending {v} (invalid code or fields)")),
                    Err(e) => dropped.push(format!("pending {v} ({e})")),
                }
            }
        }
        Some(_) => dropped.push("pending (not a list)".into()),
    }
    // At most the platform's cap per platform: the newest are kept.
    let mut per_platform: BTreeMap<String, usize> = BTreeMap::new();
    st.pending.sort_by_key(|p| std::cmp::Reverse(p.created_ms));
    st.pending.retain(|p| {
        let max = max_pending(&p.platform);
        let n = per_platform.entry(p.platform.clone()).or_default();
        *n += 1;
        if *n > max {
            dropped.push(format!(
                "pending code {} beyond {max} for {} ([access.{}] pairing_max_pending)",
                p.code, p.platform, p.platform
            ));
        }
        *n <= max
    });
    st.pending.sort_by_key(|p| p.created_ms);
    Ok((st, dropped))
}

/// A pairing code as issued: 4 to 32 characters of the code alphabet.
fn code_ok(code: &str) -> bool {
    (4..=32).contains(&code.len()) && code.bytes().all(|b| ALPHABET.contains(&b))
}

fn pairing_message(code: &str, ttl: Duration) -> String {
    // A code read from access.json may be of any length: split it only where it can be.
    let shown = match (code.get(..4), code.get(4..)) {
        (Some(head), Some(tail)) if !tail.is_empty() => format!("{head}-{tail}"),
        _ => code.to_string(),
    };
    format!(
        "this chat is not paired with clibot yet. Your pairing code is {shown}; the owner approves it on the machine with `clibotctl pairing approve {code}` (it expires in {})",
        crate::duration::format_words(ttl)
    )
}

/// The group a chat key belongs to: `CHAT` of a topic `CHAT/THREAD`, else the key itself.
pub fn group_of(chat: &str) -> &str {
    chat.split_once('/').map_or(chat, |(g, _)| g)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pairing_message_never_panics_on_an_odd_code() {
        for code in ["", "AB", "ABCD", "ABCDEFGH", "ÄÖÜ€x"] {
            let m = super::pairing_message(code, DEFAULT_PAIRING_TTL);
            assert!(m.contains("pairing code is"), "{m}");
        }
        assert!(super::pairing_message("ABCDEFGH", DEFAULT_PAIRING_TTL).contains("ABCD-EFGH"));
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
                ..Default::default()
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
        a.check("telegram", "8", "");
        assert_eq!(a.pending().len(), 2);
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
    fn pending_codes_are_plentiful_but_bounded_the_oldest_giving_way() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(dir.path(), Policy::Pairing);
        let code_of = |d: Decision| match d {
            Decision::Denied { code: Some(c), .. } => c,
            other => panic!("a code expected, got {other:?}"),
        };
        let t0 = now_ms();
        let first = code_of(a.check_at("telegram", "u0", "", t0).0);
        for i in 1..DEFAULT_MAX_PENDING {
            a.check_at("telegram", &format!("u{i}"), "", t0 + i as i64);
        }
        assert_eq!(a.pending().len(), DEFAULT_MAX_PENDING);
        // Asking again keeps the one code, and takes no new slot.
        assert_eq!(code_of(a.check_at("telegram", "u0", "", t0 + 100).0), first);
        assert_eq!(a.pending().len(), DEFAULT_MAX_PENDING);
        // One more stranger: the oldest request gives way, and its code no longer works.
        let (d, issued) = a.check_at("telegram", "new", "", t0 + 200);
        assert!(issued);
        code_of(d);
        assert_eq!(a.pending().len(), DEFAULT_MAX_PENDING);
        assert!(a.pending().iter().all(|p| p.user != "u0"));
        assert_eq!(
            a.approve(&first),
            Err(AccessError::UnknownCode(first.clone()))
        );
        // Other platforms have their own slots.
        code_of(a.check("discord", "d1", ""));
        assert_eq!(a.pending().len(), DEFAULT_MAX_PENDING + 1);
    }

    #[test]
    fn the_lifetime_and_the_cap_come_from_the_config_and_follow_a_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = |ttl: u64, max: usize| {
            let mut c = BTreeMap::new();
            c.insert(
                "telegram".to_string(),
                PlatformAccess {
                    pairing_ttl: Duration::from_secs(ttl),
                    pairing_max_pending: max,
                    ..Default::default()
                },
            );
            c
        };
        let a = Access::open(dir.path(), conf(30 * 60, 3)).0;
        let code_of = |d: Decision| match d {
            Decision::Denied { code: Some(c), .. } => c,
            other => panic!("a code expected, got {other:?}"),
        };
        let t0 = now_ms();
        let (d, _) = a.check_at("telegram", "u0", "", t0);
        let Decision::Denied { reason, .. } = &d else {
            panic!("{d:?}")
        };
        assert!(reason.contains("it expires in 30 minutes"), "{reason}");
        let first = code_of(d);
        // Asked again 10 minutes later: the time it has left.
        let (d, _) = a.check_at("telegram", "u0", "", t0 + 10 * 60_000);
        let Decision::Denied { reason, .. } = &d else {
            panic!("{d:?}")
        };
        assert!(reason.contains("it expires in 20 minutes"), "{reason}");
        // Three wait at most: the fourth takes the oldest one's place.
        for i in 1..=3 {
            a.check_at("telegram", &format!("u{i}"), "", t0 + i);
        }
        assert_eq!(a.pending().len(), 3);
        assert!(a.pending().iter().all(|p| p.code != first));
        // Other platforms keep the defaults.
        code_of(a.check("discord", "d1", ""));
        assert_eq!(a.pending().len(), 4);
        // Past the lifetime, a code is gone: a new one is issued.
        let (d, issued) = a.check_at("telegram", "u1", "", t0 + 31 * 60_000);
        assert!(issued, "{d:?}");
        // A reload applies at once: a shorter lifetime expires codes issued before it.
        let (_, issued) = a.check_at("telegram", "u9", "", now_ms());
        assert!(issued);
        assert!(a.pending().iter().any(|p| p.user == "u9"));
        a.set_config(conf(1, 3));
        std::thread::sleep(Duration::from_millis(1100));
        assert!(
            a.pending().iter().all(|p| p.user != "u9"),
            "{:?}",
            a.pending()
        );
        // A lower cap read from the file at start keeps the newest.
        drop(a);
        let mut st = AccessFile::default();
        for i in 0..5 {
            st.pending.push(Pending {
                code: format!("ABCDEFG{}", (b'A' + i) as char),
                platform: "telegram".into(),
                user: format!("w{i}"),
                name: String::new(),
                created_ms: now_ms() + i64::from(i),
                chat: String::new(),
            });
        }
        std::fs::write(
            dir.path().join("access.json"),
            serde_json::to_vec(&st).expect("json"),
        )
        .expect("write");
        let (a, w) = Access::open(dir.path(), conf(3600, 2));
        assert!(w.iter().any(|w| w.contains("pairing_max_pending")), "{w:?}");
        let users: Vec<String> = a.pending().into_iter().map(|p| p.user).collect();
        assert_eq!(users, ["w3", "w4"]);
    }

    #[test]
    fn strangers_are_answered_now_and_then() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = access(dir.path(), Policy::Pairing);
        let reason = |d: &Decision| match d {
            Decision::Denied { reason, .. } => reason.clone(),
            other => panic!("denied expected, got {other:?}"),
        };
        let t0 = now_ms();
        // Pairing: the code is told when issued, then at most every ten minutes.
        let (d, issued) = a.check_chat_at("telegram", "7", "", t0);
        assert!(issued && reason(&d).contains("pairing code"), "{d:?}");
        let (d, issued) = a.check_chat_at("telegram", "7", "", t0 + 5_000);
        assert!(!issued && reason(&d).is_empty(), "{d:?}");
        assert!(
            matches!(d, Decision::Denied { code: Some(_), .. }),
            "the code is still known"
        );
        let (d, _) = a.check_chat_at("telegram", "7", "", t0 + CODE_REMIND_MS - 1);
        assert!(reason(&d).is_empty());
        let (d, _) = a.check_chat_at("telegram", "7", "", t0 + CODE_REMIND_MS);
        assert!(reason(&d).contains("pairing code"), "told again: {d:?}");
        // Each user has their own clock.
        let (d, _) = a.check_chat_at("telegram", "8", "", t0 + 5_000);
        assert!(reason(&d).contains("pairing code"));
        // Allowed users are never held back.
        let (d, _) = a.check_chat_at("telegram", "42", "", t0 + 5_001);
        assert_eq!(d, Decision::Allowed { admin: false });
        // Refused without a code: at most once a minute.
        let a = access(dir.path(), Policy::Allowlist);
        let (d, _) = a.check_chat_at("telegram", "9", "", t0);
        assert!(reason(&d).contains("allowlist"));
        for dt in [1, 1_000, REFUSAL_REPLY_MS - 1] {
            assert!(reason(&a.check_chat_at("telegram", "9", "", t0 + dt).0).is_empty());
        }
        assert!(
            reason(
                &a.check_chat_at("telegram", "9", "", t0 + REFUSAL_REPLY_MS)
                    .0
            )
            .contains("allowlist")
        );
        // The plain check (used to refuse actions) always says why.
        assert!(reason(&a.check("telegram", "9", "")).contains("allowlist"));
    }

    #[test]
    fn bad_entries_in_the_file_are_dropped_told_and_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let now = now_ms();
        let file = format!(
            r#"{{"approved": [
                {{"platform": "telegram", "user": "5", "name": "ann", "approved_ms": 1}},
                {{"platform": "telegram", "user": "5", "approved_ms": 2}},
                {{"platform": "", "user": "6", "approved_ms": 1}},
                {{"platform": "telegram", "user": "a\u0007b", "approved_ms": 1}},
                {{"platform": "telegram", "user": "{long}", "approved_ms": 1}},
                17
            ],
            "pending": [
                {{"code": "ABCDEFGH", "platform": "telegram", "user": "9", "created_ms": {now}}},
                {{"code": "AB", "platform": "telegram", "user": "10", "created_ms": {now}}},
                {{"code": "ABCDEFG0", "platform": "telegram", "user": "11", "created_ms": {now}}},
                {{"code": "ABCDEFGH", "platform": "telegram", "user": "12", "created_ms": {now}}},
                {{"code": "ABCDEFGJ", "platform": "telegram", "user": "13"}}
            ]}}"#,
            long = "x".repeat(300)
        );
        std::fs::write(dir.path().join("access.json"), file).expect("write");
        let (a, w) = Access::open(dir.path(), BTreeMap::new());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("9 entries"), "{w:?}");
        assert!(
            !crate::store::copies(dir.path(), "access.json.bad-").is_empty(),
            "the file as it was is kept"
        );
        assert_eq!(
            a.approved(),
            vec![("telegram".into(), "5".into(), "ann".into())]
        );
        assert_eq!(a.pending().len(), 1);
        assert_eq!(
            a.check("telegram", "5", ""),
            Decision::Allowed { admin: false }
        );
        assert_eq!(a.approve("abcd-efgh"), Ok(("telegram".into(), "9".into())));
        // Saved clean: a reopen has nothing to say.
        let (a, w) = Access::open(dir.path(), BTreeMap::new());
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(a.approved().len(), 2);
        // Not JSON at all: set aside, started empty.
        std::fs::write(dir.path().join("access.json"), "{ torn").expect("write");
        let (a, w) = Access::open(dir.path(), BTreeMap::new());
        assert!(w.iter().any(|w| w.contains("corrupt")), "{w:?}");
        assert!(a.approved().is_empty());
    }

    #[test]
    fn an_unreadable_file_is_never_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("access.json");
        // A directory where the file should be: reading fails with something other than
        // "not found", as a permission problem would (tests may run as root).
        std::fs::create_dir(&path).expect("mkdir");
        let (a, w) = Access::open(dir.path(), BTreeMap::new());
        assert!(
            w.iter()
                .any(|w| w.contains("cannot read") && w.contains("restart")),
            "{w:?}"
        );
        assert!(matches!(
            a.check("telegram", "7", ""),
            Decision::Denied { code: Some(_), .. }
        ));
        assert!(path.is_dir(), "left alone");
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
        a.lock().pending[0].created_ms -= DEFAULT_PAIRING_TTL.as_millis() as i64 + 1;
        assert_eq!(a.approve(&code), Err(AccessError::UnknownCode(code)));
        assert!(a.pending().is_empty());
    }
}
