//! What the chat gateway must not keep itself, because it can be killed at any moment: which
//! session each chat is bound to, how far each chat has been delivered the event log (per chat,
//! so that one dead chat never holds up another), which prompt each chat was last shown, and —
//! for platforms that cannot redeliver (Discord) — the last message handled per chat.
//! Persisted in `chats.json`, written atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::model::Actor;
use crate::store::{MAX_SEQ, dropped_entries, sane_seq, set_aside, write_atomic};

/// A chat bound to a session, and how far it has been delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub platform: String,
    pub chat: String,
    pub session: String,
    /// Every event up to this seq was delivered to the chat (or was not for it).
    #[serde(default)]
    pub cursor: u64,
    /// Event `cursor + 1` is partly delivered: its first `parts` messages went out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parts: u32,
    /// Suspended because the chat failed for good: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<String>,
    /// A group chat or server channel rather than a direct message.
    #[serde(default)]
    pub group: bool,
    /// The prompt last shown in this chat, and the platform's id of the message showing it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shown_prompt: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shown_message: String,
    /// Who bound the chat ("PLATFORM:USER", or "local"): delivery stops once they may no
    /// longer use the session. Empty for a group bound before this was recorded: suspended
    /// until an allowed user writes there.
    #[serde(default)]
    pub binder: String,
    /// The binder lost the right to the session: the chat receives events up to this one (the
    /// notice saying so), then the binding ends. 0: no end set.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub until_seq: u64,
    /// A message of this event (seq, the part counted from 0) was being sent, not yet
    /// acknowledged: if the gateway died meanwhile, it may have reached the chat. Recorded in
    /// memory only (a write per message would cost more than the rare notice it saves); saved
    /// with the next change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sending: Option<(u64, u32)>,
    /// The status message of the turn running in this chat, so that a restarted gateway edits
    /// it rather than posting another one next to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TurnStatus>,
}

/// A running turn's status message in one chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStatus {
    /// The platform's id of the message.
    pub message: String,
    pub session: String,
    /// When the turn began (Unix ms, the daemon's clock).
    pub started_ms: i64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Binding {
    fn new(
        platform: &str,
        chat: &str,
        session: &str,
        group: bool,
        cursor: u64,
        binder: &str,
    ) -> Binding {
        Binding {
            binder: binder.into(),
            until_seq: 0,
            platform: platform.into(),
            chat: chat.into(),
            session: session.into(),
            cursor,
            parts: 0,
            broken: None,
            group,
            shown_prompt: String::new(),
            shown_message: String::new(),
            sending: None,
            status: None,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ChatsFile {
    #[serde(default)]
    cursors: BTreeMap<String, u64>,
    #[serde(default)]
    bindings: Vec<Binding>,
    /// platform → chat → id of the last message handled there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    ingress: BTreeMap<String, BTreeMap<String, String>>,
    /// platform → the private chats admins wrote from: where sessions clibot does not run
    /// report (a Telegram private chat's id is its user's, a Discord DM's or a Feishu p2p
    /// chat's is not, so they are learned as admins write).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    admin_chats: BTreeMap<String, std::collections::BTreeSet<String>>,
}

/// A per-chat acknowledgement: how far one chat got.
#[derive(Debug, Default, Clone)]
pub struct ChatAck<'a> {
    pub seq: u64,
    /// Messages of event `seq` delivered so far; 0 = all of it.
    pub parts: u32,
    /// The prompt event `seq` showed, and the id of the message that shows it.
    pub prompt: &'a str,
    pub message: &'a str,
    /// Not an acknowledgement: message `parts` (from 0) of event `seq` is about to be sent.
    pub sending: bool,
    /// The chat's status message was posted (`Some` with a message) or closed (`Some` with an
    /// empty one).
    pub status: Option<TurnStatus>,
}

/// The most chats per platform whose last handled message is kept.
pub const MAX_INGRESS_CHATS: usize = 4096;

/// When each chat's ingress cursor was last moved (a counter, in memory only): which chat
/// makes room when the table is full.
type Touched = (u64, std::collections::HashMap<(String, String), u64>);

fn lock_order(m: &Mutex<Touched>) -> std::sync::MutexGuard<'_, Touched> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bindings and cursors.
pub struct Chats {
    /// Bindings whose cursor was out of range and for which the file had no other position to
    /// give them: [`Chats::place_unplaced`] puts them at the log's end.
    unplaced: Mutex<Vec<(String, String)>>,
    path: PathBuf,
    state: Mutex<ChatsFile>,
    touched: Mutex<Touched>,
    /// False when the file exists but could not be read: saving would overwrite what is there.
    writable: bool,
}

impl Chats {
    /// Loads `chats.json`. A file that is not JSON is set aside; an entry that does not make
    /// sense is dropped with a warning (the whole file is kept aside first, as
    /// `chats.json.bad-<ms>`); a file that cannot be read at all (permissions, I/O) is left
    /// alone and never overwritten while it stays so. Numbers above [`MAX_SEQ`] are damage:
    /// see `parse` for what becomes of them.
    pub fn open(state_dir: &Path) -> (Chats, Vec<String>) {
        let path = state_dir.join("chats.json");
        let mut warnings = Vec::new();
        let mut writable = true;
        let mut unplaced = Vec::new();
        let state = match std::fs::read(&path) {
            Ok(b) => match parse(&b) {
                Ok((state, dropped, zero)) => {
                    unplaced = zero;
                    if !dropped.is_empty() {
                        warnings.push(dropped_entries(&path, "chat bindings file", &dropped));
                    }
                    state
                }
                Err(e) => {
                    let kept = set_aside(&path)
                        .map(|p| p.display().to_string())
                        .unwrap_or_default();
                    warnings.push(format!(
                        "chat bindings file {} is corrupt ({e}); kept at {kept}; chats must choose their session again",
                        path.display()
                    ));
                    ChatsFile::default()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ChatsFile::default(),
            Err(e) => {
                writable = false;
                warnings.push(format!(
                    "cannot read chat bindings file {} ({e}); chat bindings and delivery are not saved until it can be read: fix its permissions and restart clibotd",
                    path.display()
                ));
                ChatsFile::default()
            }
        };
        let repaired = warnings.iter().any(|w| w.contains("could not be used"));
        let chats = Chats {
            unplaced: Mutex::new(unplaced),
            path,
            state: Mutex::new(state),
            touched: Mutex::new(Default::default()),
            writable,
        };
        if repaired {
            // Saved cleaned at once (the original is kept aside): the same damage is not
            // reported again at every start until some chat happens to move.
            chats.save(&chats.lock());
        }
        (chats, warnings)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ChatsFile> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the bindings whose out-of-range cursor found no other position in the file (see
    /// `parse`) to `last_seq`, the event log's end: they receive what happens from now on,
    /// instead of the whole retained log again. Called once the log is open.
    pub fn place_unplaced(&self, last_seq: u64) {
        let unplaced =
            std::mem::take(&mut *self.unplaced.lock().unwrap_or_else(|p| p.into_inner()));
        if unplaced.is_empty() {
            return;
        }
        let mut st = self.lock();
        for (platform, chat) in unplaced {
            if let Some(b) = st
                .bindings
                .iter_mut()
                .find(|b| b.platform == platform && b.chat == chat && b.cursor == 0)
            {
                b.cursor = last_seq;
            }
        }
        self.save(&st);
    }

    fn save(&self, st: &ChatsFile) {
        if !self.writable {
            return;
        }
        match serde_json::to_vec_pretty(st) {
            Ok(data) => {
                if let Err(e) = write_atomic(&self.path, &data) {
                    tracing::error!(path = %self.path.display(), "cannot save chat bindings: {e}");
                }
            }
            Err(e) => tracing::error!("cannot encode chat bindings: {e}"),
        }
    }

    /// Records that `consumer` delivered everything up to `seq`. Cursors never move back, so a
    /// late acknowledgement from a previous run cannot cause a redelivery.
    pub fn ack(&self, consumer: &str, seq: u64) -> u64 {
        let mut st = self.lock();
        let cur = st.cursors.entry(consumer.to_string()).or_insert(0);
        if seq > *cur {
            *cur = seq;
            let v = *cur;
            self.save(&st);
            return v;
        }
        *cur
    }

    /// Records how far one chat got; `None` when the chat is not bound. Like consumer cursors,
    /// a chat's cursor never moves back.
    pub fn ack_chat(&self, platform: &str, chat: &str, ack: &ChatAck) -> Option<u64> {
        let mut st = self.lock();
        let b = st
            .bindings
            .iter_mut()
            .find(|b| b.platform == platform && b.chat == chat)?;
        if ack.sending {
            if ack.seq > b.cursor {
                b.sending = Some((ack.seq, ack.parts));
            }
            return Some(b.cursor);
        }
        let mut changed = false;
        if b.sending.is_some_and(|(seq, _)| ack.seq >= seq) {
            b.sending = None;
        }
        if let Some(status) = &ack.status {
            b.status = (!status.message.is_empty()).then(|| status.clone());
            changed = true;
        }
        if ack.parts == 0 {
            if ack.seq > b.cursor {
                b.cursor = ack.seq;
                b.parts = 0;
                changed = true;
            }
        } else if ack.seq > b.cursor && (ack.seq - 1 > b.cursor || ack.parts > b.parts) {
            if ack.seq - 1 > b.cursor {
                b.parts = 0;
            }
            b.cursor = ack.seq - 1;
            b.parts = b.parts.max(ack.parts);
            changed = true;
        }
        if !ack.prompt.is_empty() {
            b.shown_prompt = ack.prompt.to_string();
            b.shown_message = ack.message.to_string();
            changed = true;
        }
        let cursor = b.cursor;
        if b.until_seq != 0 && b.cursor >= b.until_seq {
            // The chat was told its binder lost the session: the binding ends here.
            st.bindings
                .retain(|b| !(b.platform == platform && b.chat == chat));
            changed = true;
        }
        if changed {
            self.save(&st);
        }
        Some(cursor)
    }

    /// Ends delivery to a chat after event `seq` (see [`Binding::until_seq`]).
    pub fn end_after(&self, platform: &str, chat: &str, seq: u64) {
        let mut st = self.lock();
        if let Some(b) = st
            .bindings
            .iter_mut()
            .find(|b| b.platform == platform && b.chat == chat)
        {
            b.until_seq = seq;
            self.save(&st);
        }
    }

    /// The consumer's cursor (0 when it never acknowledged anything).
    pub fn cursor(&self, consumer: &str) -> u64 {
        self.lock().cursors.get(consumer).copied().unwrap_or(0)
    }

    /// The highest event seq any cursor has passed: the log must number above it.
    pub fn max_seq(&self) -> u64 {
        let st = self.lock();
        let consumers = st.cursors.values().copied().max().unwrap_or(0);
        let chats = st
            .bindings
            .iter()
            .map(|b| b.cursor.saturating_add(u64::from(b.parts > 0)))
            .max()
            .unwrap_or(0);
        consumers.max(chats)
    }

    /// Binds a chat to a session (an empty session unbinds it). Binding a chat again to the
    /// session it has keeps its delivery position, unless it was suspended: a suspended chat
    /// that writes again resumes from now (`last_seq`), not with everything it missed.
    pub fn bind(
        &self,
        platform: &str,
        chat: &str,
        session: &str,
        group: bool,
        last_seq: u64,
        binder: &str,
    ) {
        let mut st = self.lock();
        let pos = st
            .bindings
            .iter()
            .position(|b| b.platform == platform && b.chat == chat);
        match pos {
            Some(i) if st.bindings[i].session == session && !session.is_empty() => {
                let b = &mut st.bindings[i];
                if b.broken.is_none() && b.group == group && b.binder == binder && b.until_seq == 0
                {
                    return;
                }
                b.binder = binder.to_string();
                b.until_seq = 0;
                if b.broken.take().is_some() {
                    b.cursor = b.cursor.max(last_seq);
                    b.parts = 0;
                }
                b.group = group;
            }
            Some(i) => {
                st.bindings.remove(i);
                if !session.is_empty() {
                    st.bindings.push(Binding::new(
                        platform, chat, session, group, last_seq, binder,
                    ));
                }
            }
            None if session.is_empty() => return,
            None => st.bindings.push(Binding::new(
                platform, chat, session, group, last_seq, binder,
            )),
        }
        self.save(&st);
    }

    /// Who bound chats to `session` (each once).
    pub fn binders_of(&self, session: &str) -> Vec<String> {
        let st = self.lock();
        let mut out: Vec<String> = st
            .bindings
            .iter()
            .filter(|b| b.session == session)
            .map(|b| b.binder.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Ends the bindings to `session` that one of `binders` made: a new session that took a
    /// freed name inherits no other person's chats or topics. Returns how many ended.
    pub fn end_bindings_by(&self, session: &str, binders: &[String]) -> usize {
        let mut st = self.lock();
        let before = st.bindings.len();
        st.bindings
            .retain(|b| b.session != session || !binders.contains(&b.binder));
        let ended = before - st.bindings.len();
        if ended > 0 {
            self.save(&st);
        }
        ended
    }

    /// Gives `chat` a binding to no session (a "home" binding: a delivery cursor, starting at
    /// `last_seq`) if it has none, so that the events it is sent without being bound (a default
    /// chat's) are delivered to it once, from where it was set. A chat with a binding keeps it.
    pub fn ensure_home(&self, platform: &str, chat: &str, last_seq: u64) {
        let mut st = self.lock();
        if st
            .bindings
            .iter()
            .any(|b| b.platform == platform && b.chat == chat)
        {
            return;
        }
        st.bindings.push(Binding::new(
            platform,
            chat,
            "",
            false,
            last_seq,
            Actor::LOCAL,
        ));
        self.save(&st);
    }

    /// Records `chat` as an admin's private chat (with a delivery position of its own when it
    /// has no binding yet).
    pub fn note_admin_chat(&self, platform: &str, chat: &str, last_seq: u64) {
        let mut st = self.lock();
        let new = st
            .admin_chats
            .entry(platform.to_string())
            .or_default()
            .insert(chat.to_string());
        if !new {
            return;
        }
        if !st
            .bindings
            .iter()
            .any(|b| b.platform == platform && b.chat == chat)
        {
            st.bindings.push(Binding::new(
                platform,
                chat,
                "",
                false,
                last_seq,
                Actor::LOCAL,
            ));
        }
        self.save(&st);
    }

    /// The admins' private chats of `platform` ([`Chats::note_admin_chat`]).
    pub fn admin_chats(&self, platform: &str) -> Vec<String> {
        self.lock()
            .admin_chats
            .get(platform)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Moves every chat bound to `from` to `to` (a delegation), keeping each chat's delivery
    /// position: what `to` says from now on reaches them. Returns the chats moved.
    pub fn move_session(&self, from: &str, to: &str) -> Vec<(String, String)> {
        let mut st = self.lock();
        let mut moved = Vec::new();
        for b in st.bindings.iter_mut().filter(|b| b.session == from) {
            b.session = to.to_string();
            b.shown_prompt.clear();
            b.shown_message.clear();
            moved.push((b.platform.clone(), b.chat.clone()));
        }
        if !moved.is_empty() {
            self.save(&st);
        }
        moved
    }

    /// Suspends a chat's binding; returns the session it was bound to.
    pub fn mark_broken(&self, platform: &str, chat: &str, reason: &str) -> Option<String> {
        let mut st = self.lock();
        let b = st
            .bindings
            .iter_mut()
            .find(|b| b.platform == platform && b.chat == chat)?;
        if b.broken.is_some() {
            return None;
        }
        b.broken = Some(reason.to_string());
        let session = b.session.clone();
        self.save(&st);
        Some(session)
    }

    /// Bindings matching the filters (empty filters match all).
    pub fn bindings(&self, platform: &str, chat: &str, session: &str) -> Vec<Binding> {
        self.lock()
            .bindings
            .iter()
            .filter(|b| platform.is_empty() || b.platform == platform)
            .filter(|b| chat.is_empty() || b.chat == chat)
            .filter(|b| session.is_empty() || b.session == session)
            .cloned()
            .collect()
    }

    /// Records the last message handled in a chat of a platform without redelivery. Ids that
    /// are numbers (Discord snowflakes) only move forward.
    ///
    /// A chat not yet known is recorded only when `may_create` (its sender may use clibot, or
    /// the chat is bound): a stranger's message costs nothing on disk. At most
    /// [`MAX_INGRESS_CHATS`] chats per platform are kept; the one acknowledged least recently
    /// makes room.
    pub fn ack_ingress(&self, platform: &str, chat: &str, id: &str, may_create: bool) {
        let mut st = self.lock();
        let known = st
            .ingress
            .get(platform)
            .is_some_and(|m| m.contains_key(chat))
            || st
                .bindings
                .iter()
                .any(|b| b.platform == platform && b.chat == chat);
        if !known && !may_create {
            return;
        }
        {
            let mut t = lock_order(&self.touched);
            t.0 += 1;
            let n = t.0;
            t.1.insert((platform.to_string(), chat.to_string()), n);
        }
        let table = st.ingress.entry(platform.to_string()).or_default();
        if !table.contains_key(chat) && table.len() >= MAX_INGRESS_CHATS {
            let t = lock_order(&self.touched);
            let oldest = table
                .keys()
                .filter(|c| c.as_str() != chat)
                .min_by_key(|c| {
                    t.1.get(&(platform.to_string(), (*c).clone()))
                        .copied()
                        .unwrap_or(0)
                })
                .cloned();
            drop(t);
            if let Some(c) = oldest {
                table.remove(&c);
                lock_order(&self.touched)
                    .1
                    .remove(&(platform.to_string(), c));
            }
        }
        let cur = table.entry(chat.to_string()).or_default();
        let newer = match (cur.parse::<u64>(), id.parse::<u64>()) {
            (Ok(a), Ok(b)) => b > a,
            _ => cur.as_str() != id,
        };
        if newer {
            *cur = id.to_string();
            self.save(&st);
        }
    }

    /// chat → last handled message id, for one platform.
    pub fn ingress(&self, platform: &str) -> Vec<(String, String)> {
        self.lock()
            .ingress
            .get(platform)
            .map(|m| m.iter().map(|(c, i)| (c.clone(), i.clone())).collect())
            .unwrap_or_default()
    }
}

/// Parses `chats.json` entry by entry: what cannot be used is dropped and described. A number
/// above [`MAX_SEQ`] is damage: a consumer cursor is dropped (the platform resumes at its chats'
/// positions), a binding's `until_seq` drops the binding (it was ending anyway), and a binding's
/// cursor is replaced by the highest in-range cursor of its platform, so the chat keeps its
/// binding and receives again.
#[allow(clippy::type_complexity)]
fn parse(
    bytes: &[u8],
) -> Result<(ChatsFile, Vec<String>, Vec<(String, String)>), serde_json::Error> {
    let raw: serde_json::Value = serde_json::from_slice(bytes)?;
    let mut dropped = Vec::new();
    // Bindings whose cursor was above the bound: (platform, chat, the cursor read).
    let mut absurd: Vec<(String, String, u64)> = Vec::new();
    let mut st = ChatsFile::default();
    let obj = match raw {
        serde_json::Value::Object(o) => o,
        other => {
            dropped.push(format!("the file holds {other} instead of an object"));
            return Ok((st, dropped, Vec::new()));
        }
    };
    let mut unplaced = Vec::new();
    if let Some(v) = obj.get("cursors") {
        match v.as_object() {
            Some(m) => {
                for (k, v) in m {
                    match v.as_u64() {
                        Some(n) if !k.is_empty() && sane_seq(n) => {
                            st.cursors.insert(k.clone(), n);
                        }
                        Some(n) if n > MAX_SEQ => dropped.push(format!(
                            "cursor {k:?} = {n} (above 2^53: damaged or edited; it starts again from its chats' positions)"
                        )),
                        _ => dropped.push(format!("cursor {k:?} = {v}")),
                    }
                }
            }
            None => dropped.push("cursors (not an object)".into()),
        }
    }
    if let Some(v) = obj.get("bindings") {
        match v.as_array() {
            Some(list) => {
                for v in list {
                    match serde_json::from_value::<Binding>(v.clone()) {
                        Ok(b) if valid(&b) && !sane_seq(b.until_seq) => dropped.push(format!(
                            "binding {}:{}: until_seq = {} is above 2^53 (damaged or edited); the binding, which was ending, is removed: bind the chat again if it should receive",
                            b.platform, b.chat, b.until_seq
                        )),
                        Ok(mut b) if valid(&b) => {
                            if !sane_seq(b.cursor) {
                                absurd.push((b.platform.clone(), b.chat.clone(), b.cursor));
                                // Placed below, once every in-range cursor is known.
                                b.cursor = 0;
                                b.parts = 0;
                            }
                            // Bound before binders were recorded: a private chat's binder is
                            // its user (the chat id, on the platforms where they are one);
                            // a group waits for an allowed user's next message.
                            if b.binder.is_empty() && !b.group {
                                b.binder = format!("{}:{}", b.platform, b.chat);
                            }
                            if st
                                .bindings
                                .iter()
                                .any(|o| o.platform == b.platform && o.chat == b.chat)
                            {
                                dropped.push(format!(
                                    "a second binding for {}:{}",
                                    b.platform, b.chat
                                ));
                            } else {
                                st.bindings.push(b);
                            }
                        }
                        Ok(_) => dropped.push(format!("binding {v} (empty or invalid names)")),
                        Err(e) => dropped.push(format!("binding {v} ({e})")),
                    }
                }
            }
            None => dropped.push("bindings (not a list)".into()),
        }
    }
    if let Some(v) = obj.get("ingress") {
        match serde_json::from_value::<BTreeMap<String, BTreeMap<String, String>>>(v.clone()) {
            Ok(m) => st.ingress = m,
            Err(e) => dropped.push(format!("ingress ({e})")),
        }
    }
    // A cursor above the bound resumes where the platform's other chats are (its dispatcher's
    // cursor and its chats' cursors; any platform's when it has none): close to the log's end,
    // so the chat receives again, neither silenced by a cursor no event reaches nor flooded
    // with the retained log.
    for (platform, chat, was) in absurd {
        let highest = |same: bool| {
            let consumers = st
                .cursors
                .iter()
                .filter(|(k, _)| !same || k.split(':').next() == Some(platform.as_str()))
                .map(|(_, v)| *v);
            let chats = st
                .bindings
                .iter()
                .filter(|b| !same || b.platform == platform)
                .map(|b| b.cursor);
            consumers.chain(chats).max().filter(|n| *n > 0)
        };
        let resume = highest(true).or_else(|| highest(false)).unwrap_or(0);
        if let Some(b) = st
            .bindings
            .iter_mut()
            .find(|b| b.platform == platform && b.chat == chat)
        {
            b.cursor = resume;
        }
        if resume == 0 {
            dropped.push(format!(
                "binding {platform}:{chat}: cursor = {was} is above 2^53 (damaged or edited; no event would ever reach it); it resumes at the event log's end"
            ));
            unplaced.push((platform, chat));
        } else {
            dropped.push(format!(
                "binding {platform}:{chat}: cursor = {was} is above 2^53 (damaged or edited; no event would ever reach it); it resumes at event {resume}, where the other chats are"
            ));
        }
    }
    // Bindings written before delivery was tracked per chat start where their platform was.
    for b in st.bindings.iter_mut().filter(|b| {
        b.cursor == 0
            && !unplaced
                .iter()
                .any(|(p, c)| *p == b.platform && *c == b.chat)
    }) {
        b.cursor = st
            .cursors
            .iter()
            .filter(|(k, _)| k.split(':').next() == Some(b.platform.as_str()))
            .map(|(_, v)| *v)
            .max()
            .unwrap_or(0);
        if b.platform == "telegram" && b.chat.starts_with('-') {
            b.group = true;
        }
    }
    Ok((st, dropped, unplaced))
}

fn valid(b: &Binding) -> bool {
    let name_ok = |s: &str| !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control);
    name_ok(&b.platform) && name_ok(&b.chat) && name_ok(&b.session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strangers_make_no_ingress_state_and_the_table_is_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (c, _) = Chats::open(dir.path());
        c.ack_ingress("discord", "stranger", "5", false);
        assert!(
            c.ingress("discord").is_empty(),
            "a stranger's chat is not kept"
        );
        c.ack_ingress("discord", "known", "5", true);
        // Once known, any later message moves its cursor.
        c.ack_ingress("discord", "known", "6", false);
        assert_eq!(c.ingress("discord"), vec![("known".into(), "6".into())]);
        for i in 0..MAX_INGRESS_CHATS + 10 {
            c.ack_ingress("discord", &format!("c{i}"), "1", true);
        }
        let kept = c.ingress("discord");
        assert_eq!(kept.len(), MAX_INGRESS_CHATS);
        assert!(
            !kept.iter().any(|(k, _)| k == "known"),
            "the oldest made room"
        );
        assert!(
            kept.iter()
                .any(|(k, _)| k == &format!("c{}", MAX_INGRESS_CHATS + 9))
        );
    }

    fn ack(seq: u64, parts: u32) -> ChatAck<'static> {
        ChatAck {
            seq,
            parts,
            ..Default::default()
        }
    }

    #[test]
    fn cursors_only_advance_and_everything_persists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (c, w) = Chats::open(dir.path());
        assert!(w.is_empty());
        assert_eq!(c.cursor("telegram"), 0);
        assert_eq!(c.ack("telegram", 10), 10);
        assert_eq!(
            c.ack("telegram", 7),
            10,
            "a late ack does not move the cursor back"
        );
        c.bind("telegram", "chat1", "api", false, 10, "telegram:u");
        c.bind("telegram", "chat1", "web", false, 12, "telegram:u");
        c.bind("discord", "chan", "api", true, 12, "telegram:u");
        c.ack_ingress("discord", "chan", "900", true);
        c.ack_ingress("discord", "chan", "899", true);
        drop(c);
        let (c, _) = Chats::open(dir.path());
        assert_eq!(c.cursor("telegram"), 10);
        let b = c.bindings("telegram", "chat1", "");
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].session.as_str(), b[0].cursor), ("web", 12));
        assert_eq!(c.bindings("", "", "api").len(), 1);
        assert_eq!(c.ingress("discord"), vec![("chan".into(), "900".into())]);
        c.bind("telegram", "chat1", "", false, 0, "telegram:u");
        assert!(c.bindings("telegram", "", "").is_empty());
    }

    #[test]
    fn a_message_in_doubt_and_a_status_are_kept_until_their_acknowledgement() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (c, _) = Chats::open(dir.path());
        c.bind("telegram", "a", "api", false, 5, "telegram:u");
        let sending = |seq, parts| ChatAck {
            seq,
            parts,
            sending: true,
            ..Default::default()
        };
        assert_eq!(c.ack_chat("telegram", "a", &sending(7, 0)), Some(5));
        let a = &c.bindings("telegram", "a", "")[0];
        assert_eq!(
            (a.cursor, a.parts, a.sending),
            (5, 0, Some((7, 0))),
            "nothing moves"
        );
        c.ack_chat("telegram", "a", &ack(7, 1));
        assert_eq!(c.bindings("telegram", "a", "")[0].sending, None);
        c.ack_chat("telegram", "a", &sending(7, 1));
        assert_eq!(c.bindings("telegram", "a", "")[0].sending, Some((7, 1)));
        c.ack_chat("telegram", "a", &ack(7, 0));
        let a = &c.bindings("telegram", "a", "")[0];
        assert_eq!((a.cursor, a.sending), (7, None));
        assert_eq!(
            c.ack_chat("telegram", "a", &sending(6, 0)),
            Some(7),
            "an old event is never in doubt"
        );
        assert_eq!(c.bindings("telegram", "a", "")[0].sending, None);
        let status = |message: &str| ChatAck {
            seq: 8,
            status: Some(TurnStatus {
                message: message.into(),
                session: "api".into(),
                started_ms: 1000,
            }),
            ..Default::default()
        };
        c.ack_chat("telegram", "a", &status("42"));
        drop(c);
        let (c, _) = Chats::open(dir.path());
        let a = &c.bindings("telegram", "a", "")[0];
        assert_eq!(a.cursor, 8);
        assert_eq!(
            a.status.as_ref().map(|s| s.message.as_str()),
            Some("42"),
            "kept on disk"
        );
        c.ack_chat(
            "telegram",
            "a",
            &ChatAck {
                seq: 9,
                ..status("")
            },
        );
        assert_eq!(c.bindings("telegram", "a", "")[0].status, None, "closed");
    }

    #[test]
    fn chat_delivery_is_tracked_per_chat_and_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (c, _) = Chats::open(dir.path());
        c.bind("telegram", "a", "api", false, 5, "telegram:u");
        c.bind("telegram", "b", "api", false, 5, "telegram:u");
        assert_eq!(c.ack_chat("telegram", "a", &ack(7, 2)), Some(6));
        assert_eq!(c.ack_chat("telegram", "a", &ack(7, 1)), Some(6));
        let a = &c.bindings("telegram", "a", "")[0];
        assert_eq!(
            (a.cursor, a.parts),
            (6, 2),
            "a late part ack keeps the parts"
        );
        assert_eq!(c.ack_chat("telegram", "a", &ack(7, 0)), Some(7));
        assert_eq!(c.bindings("telegram", "a", "")[0].parts, 0);
        assert_eq!(
            c.bindings("telegram", "b", "")[0].cursor,
            5,
            "b waits alone"
        );
        assert_eq!(c.ack_chat("telegram", "nope", &ack(7, 0)), None);
        assert_eq!(c.max_seq(), 7);
        let p = ChatAck {
            seq: 8,
            parts: 0,
            prompt: "p1",
            message: "m1",
            ..Default::default()
        };
        c.ack_chat("telegram", "b", &p);
        let b = &c.bindings("telegram", "b", "")[0];
        assert_eq!(
            (b.shown_prompt.as_str(), b.shown_message.as_str()),
            ("p1", "m1")
        );
        // Suspended, then the chat writes again: it resumes from now.
        assert_eq!(c.mark_broken("telegram", "b", "kicked"), Some("api".into()));
        assert_eq!(c.mark_broken("telegram", "b", "kicked"), None, "told once");
        c.bind("telegram", "b", "api", false, 20, "telegram:u");
        let b = &c.bindings("telegram", "b", "")[0];
        assert_eq!((b.broken.as_deref(), b.cursor), (None, 20));
        // Binding again to the same session keeps the position.
        c.bind("telegram", "a", "api", false, 30, "telegram:u");
        assert_eq!(c.bindings("telegram", "a", "")[0].cursor, 7);
    }

    #[test]
    fn a_corrupt_file_is_set_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("chats.json"), "{ nope").expect("write");
        let (c, w) = Chats::open(dir.path());
        assert!(w.iter().any(|w| w.contains("corrupt")));
        assert_eq!(c.cursor("x"), 0);
    }

    #[test]
    fn bad_entries_are_dropped_and_told_and_old_bindings_start_at_their_platform() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = r#"{"cursors": {"telegram:1": 40, "bad": -3},
            "bindings": [
                {"platform": "telegram", "chat": "-100", "session": "api"},
                {"platform": "telegram", "chat": "-100", "session": "web"},
                {"platform": "", "chat": "x", "session": "api"},
                {"chat": 5},
                "junk"
            ]}"#;
        std::fs::write(dir.path().join("chats.json"), file).expect("write");
        let (c, w) = Chats::open(dir.path());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("5 entries"), "{w:?}");
        assert_eq!(crate::store::copies(dir.path(), "chats.json.bad-").len(), 1);
        let b = c.bindings("", "", "");
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].cursor, b[0].group), (40, true));
    }

    #[test]
    fn numbers_above_the_bound_are_dropped_or_replaced_and_told() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = r#"{"cursors": {"telegram:bot": 30, "discord:bot": 18446744073709551615},
            "bindings": [
                {"platform": "telegram", "chat": "1", "session": "api", "cursor": 18446744073709551615, "parts": 2, "binder": "telegram:1"},
                {"platform": "telegram", "chat": "2", "session": "api", "cursor": 25, "binder": "telegram:2"},
                {"platform": "telegram", "chat": "3", "session": "api", "cursor": 5, "until_seq": 18446744073709551615, "binder": "telegram:3"},
                {"platform": "discord", "chat": "9", "session": "api", "cursor": 9007199254740993, "binder": "discord:9"}
            ]}"#;
        std::fs::write(dir.path().join("chats.json"), file).expect("write");
        let (c, w) = Chats::open(dir.path());
        assert_eq!(w.len(), 1, "{w:?}");
        for needle in [
            "4 entries",
            "discord:bot",
            "telegram:1: cursor = 18446744073709551615",
            "until_seq",
            "2^53",
        ] {
            assert!(w[0].contains(needle), "{needle}: {w:?}");
        }
        let one = &c.bindings("telegram", "1", "")[0];
        assert_eq!(
            (one.cursor, one.parts),
            (30, 0),
            "resumes where its platform is"
        );
        assert!(
            c.bindings("telegram", "3", "").is_empty(),
            "an absurd end removes the binding"
        );
        assert_eq!(c.cursor("discord:bot"), 0);
        // No other discord position: where any platform is.
        assert_eq!(c.bindings("discord", "9", "")[0].cursor, 30);
        assert_eq!(c.max_seq(), 30);
        assert!(c.max_seq() <= MAX_SEQ);

        let dir = tempfile::tempdir().expect("tempdir");
        let file = r#"{"bindings": [{"platform": "discord", "chat": "9", "session": "api", "cursor": 18446744073709551615}]}"#;
        std::fs::write(dir.path().join("chats.json"), file).expect("write");
        let (c, w) = Chats::open(dir.path());
        assert!(w[0].contains("the event log's end"), "{w:?}");
        assert_eq!(c.max_seq(), 0, "the log numbers from its own end");
        c.place_unplaced(77);
        assert_eq!(c.bindings("discord", "9", "")[0].cursor, 77);
        drop(c);
        let (c, w) = Chats::open(dir.path());
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.bindings("discord", "9", "")[0].cursor, 77, "saved");
    }

    #[test]
    fn an_unreadable_file_is_never_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("chats.json");
        // A directory where the file should be: reading fails with something other than
        // "not found", as a permission problem would (tests may run as root).
        std::fs::create_dir(&path).expect("mkdir");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let (c, w) = Chats::open(dir.path());
        assert!(w.iter().any(|w| w.contains("cannot read")), "{w:?}");
        c.bind("telegram", "a", "api", false, 1, "telegram:u");
        assert!(path.is_dir(), "left alone");
    }
}
