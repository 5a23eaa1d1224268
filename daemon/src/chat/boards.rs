//! Boards: per chat, the message the gateway keeps pinned and edited with the chat's sessions
//! (`!!board`). The gateway holds nothing that matters, so the message id lives here, in
//! `boards.json`: a restarted gateway (or daemon) edits the same message instead of sending a
//! new one. Changed only through [`Boards::set`] and [`Boards::off`], each written at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Boards kept at most (one per chat; a chat's new board replaces its old one).
const MAX_BOARDS: usize = 1_000;

/// One chat's board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Board {
    pub platform: String,
    pub chat: String,
    pub message_id: String,
    /// Who turned it on (`PLATFORM:USER`): it shows the sessions they may use.
    pub user: String,
    pub since_ms: i64,
}

/// Why a board was not kept.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error("a board needs a chat and its message: {0}")]
    Invalid(&'static str),
    #[error("there are {MAX_BOARDS} boards already: turn one off first (!!board off)")]
    Full,
    #[error("cannot save the boards ({0}); try again")]
    Io(#[from] std::io::Error),
}

pub struct Boards {
    path: PathBuf,
    /// By `PLATFORM\0CHAT`.
    map: Mutex<BTreeMap<String, Board>>,
}

fn key(platform: &str, chat: &str) -> String {
    format!("{platform}\0{chat}")
}

impl Boards {
    /// Reads `boards.json` in `state_dir` (a missing or unreadable file: no boards, said in
    /// the log; the next change writes it anew).
    pub fn open(state_dir: &Path) -> Boards {
        let path = state_dir.join("boards.json");
        let list: Vec<Board> = match std::fs::read(&path) {
            Ok(data) => serde_json::from_slice(&data).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), "boards unreadable, starting with none: {e}");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        let map = list
            .into_iter()
            .map(|b| (key(&b.platform, &b.chat), b))
            .collect();
        Boards {
            path,
            map: Mutex::new(map),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Board>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, map: &BTreeMap<String, Board>) -> Result<(), BoardError> {
        let list: Vec<&Board> = map.values().collect();
        let data = serde_json::to_vec_pretty(&list).map_err(std::io::Error::other)?;
        crate::store::write_atomic(&self.path, &data)?;
        Ok(())
    }

    /// `chat`'s board is message `message_id`, turned on by `user`.
    pub fn set(&self, board: Board) -> Result<(), BoardError> {
        if board.chat.is_empty() || board.platform.is_empty() {
            return Err(BoardError::Invalid("no chat"));
        }
        if board.message_id.is_empty() || board.message_id.len() > 200 {
            return Err(BoardError::Invalid("no message id"));
        }
        let mut map = self.lock();
        let k = key(&board.platform, &board.chat);
        if !map.contains_key(&k) && map.len() >= MAX_BOARDS {
            return Err(BoardError::Full);
        }
        let old = map.insert(k.clone(), board);
        if let Err(e) = self.save(&map) {
            match old {
                Some(o) => map.insert(k, o),
                None => map.remove(&k),
            };
            return Err(e);
        }
        Ok(())
    }

    /// `chat` has no board any more; the one it had, if any.
    pub fn off(&self, platform: &str, chat: &str) -> Result<Option<Board>, BoardError> {
        let mut map = self.lock();
        let Some(old) = map.remove(&key(platform, chat)) else {
            return Ok(None);
        };
        self.save(&map)?;
        Ok(Some(old))
    }

    /// The boards of `platform` (every platform's when empty), or only `chat`'s when given.
    pub fn list(&self, platform: &str, chat: Option<&str>) -> Vec<Board> {
        self.lock()
            .values()
            .filter(|b| platform.is_empty() || b.platform == platform)
            .filter(|b| chat.is_none_or(|c| b.chat == c))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(chat: &str, id: &str) -> Board {
        Board {
            platform: "telegram".into(),
            chat: chat.into(),
            message_id: id.into(),
            user: "telegram:1".into(),
            since_ms: 1,
        }
    }

    #[test]
    fn a_board_survives_a_restart_and_one_per_chat() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = Boards::open(dir.path());
        b.set(board("1", "10")).expect("set");
        b.set(board("1", "11")).expect("replaced");
        b.set(board("2", "20")).expect("set");
        let again = Boards::open(dir.path());
        assert_eq!(again.list("telegram", Some("1")), vec![board("1", "11")]);
        assert_eq!(again.list("telegram", None).len(), 2);
        assert!(again.list("slack", None).is_empty());
        assert_eq!(
            again.off("telegram", "1").expect("off"),
            Some(board("1", "11"))
        );
        assert_eq!(again.off("telegram", "1").expect("off"), None);
        assert_eq!(
            Boards::open(dir.path()).list("", None),
            vec![board("2", "20")]
        );
        assert!(b.set(board("", "1")).is_err());
        assert!(b.set(board("3", "")).is_err());
    }

    #[test]
    fn an_unreadable_file_means_no_boards() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("boards.json"), b"{not json").expect("write");
        let b = Boards::open(dir.path());
        assert!(b.list("", None).is_empty());
        b.set(board("1", "10")).expect("written anew");
        assert_eq!(Boards::open(dir.path()).list("", None).len(), 1);
    }
}
