//! Files out of a session's directory, for its chats: `!!get PATH`, and the outbox — files the
//! CLI writes into `.clibot/outbox/` (which the guard leaves alone) are moved to
//! `.clibot/sent/` and announced by a `file_sent` event, which the gateway delivers to the
//! session's chats like a reply.
//!
//! A file is sent unchanged, and only from the session's own directory: the path is opened
//! first and then checked where it really is (`/proc/self/fd`), so neither `..` nor a symlink
//! — nor one swapped in between a check and the read — reaches outside it. Never sent: a file
//! in a secret path, and a file whose name says it holds keys or passwords (`.env`, `*.pem`,
//! `id_rsa`, …). Not sent without `force` (admins): a git-ignored file (generated, or kept out
//! of the repository on purpose; asked through the safe git). The gateway refuses, likewise, a
//! text file in which its redactor finds a secret.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tracing::{info, warn};

use crate::core::Daemon;
use crate::error::CoreError;
use crate::locking::lock;
use crate::store::events::EventKind;

/// The largest file sent (Telegram's bots upload at most 50 MB).
pub const MAX_FILE_BYTES: u64 = 50 << 20;
/// Where files from a chat are stored.
pub const INBOX: &str = ".clibot/inbox";
/// Where a CLI puts files for the chat, and where they go once announced.
pub const OUTBOX: &str = ".clibot/outbox";
pub const SENT: &str = ".clibot/sent";

/// File names that hold secrets wherever they are.
const SECRET_NAMES: &[&str] = &[
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".htpasswd",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "credentials",
    "credentials.json",
    "secrets.json",
    "secrets.yaml",
    "secrets.yml",
];
/// Extensions of key and password stores.
const SECRET_EXTENSIONS: &[&str] = &[
    "pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "ppk", "gpg", "age",
];

/// A file read for a chat.
#[derive(Debug)]
pub struct FileOut {
    /// Its name (no directory).
    pub name: String,
    pub data: Vec<u8>,
}

/// Why a file's name says it holds secrets, if it does (`rel`: its path in the directory).
pub fn secret_name(rel: &Path) -> Option<String> {
    for c in rel.components() {
        let c = c.as_os_str().to_string_lossy();
        if c == ".git" || c == ".ssh" || c == ".gnupg" {
            return Some(format!("it is inside {c}"));
        }
    }
    let name = rel.file_name()?.to_string_lossy().to_ascii_lowercase();
    if SECRET_NAMES.contains(&name.as_str()) || name.starts_with(".env.") {
        return Some(format!("{name} usually holds keys or passwords"));
    }
    let ext = rel.extension()?.to_string_lossy().to_ascii_lowercase();
    SECRET_EXTENSIONS
        .contains(&ext.as_str())
        .then(|| format!("*.{ext} files hold keys or certificates"))
}

impl Daemon {
    /// Reads `path` (relative to session `name`'s directory, or absolute inside it) for a
    /// chat. `force` (admins) sends a git-ignored file too.
    pub async fn read_session_file(
        &self,
        name: &str,
        path: &str,
        force: bool,
    ) -> Result<FileOut, CoreError> {
        let rec = self.get(name)?;
        self.refuse_unmanaged(&rec)?;
        if path.trim().is_empty() {
            return Err(CoreError::InvalidArgument(
                "name a file: !!get PATH, relative to the session's directory".into(),
            ));
        }
        let dir = rec.dir.canonicalize().map_err(|e| {
            CoreError::FailedPrecondition(format!(
                "{name}'s directory {} cannot be read: {e}",
                rec.dir.display()
            ))
        })?;
        let asked = Path::new(path);
        let full = if asked.is_absolute() {
            asked.to_path_buf()
        } else {
            dir.join(asked)
        };
        let file = std::fs::File::open(&full).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CoreError::NotFound(format!(
                "there is no {path} in {name}'s directory ({})",
                dir.display()
            )),
            _ => CoreError::FailedPrecondition(format!("{path} cannot be read: {e}")),
        })?;
        // Where the opened file really is: no `..`, symlink or swap can move it afterwards.
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .or_else(|_| full.canonicalize())
            .map_err(|e| CoreError::FailedPrecondition(format!("{path} cannot be read: {e}")))?;
        let Ok(rel) = real.strip_prefix(&dir).map(Path::to_path_buf) else {
            return Err(CoreError::PermissionDenied(format!(
                "{path} is outside {name}'s directory ({}): only files in it are sent",
                dir.display()
            )));
        };
        if let Some(secret) = crate::confine::secrets::secret_containing(
            &real,
            &self.inner.secrets,
            &self.live().lifted_secrets,
        ) {
            return Err(CoreError::PermissionDenied(format!(
                "{path} is in a secret path ({}): it is never sent",
                secret.display()
            )));
        }
        if let Some(why) = secret_name(&rel) {
            return Err(CoreError::PermissionDenied(format!(
                "{path} is never sent: {why}"
            )));
        }
        let meta = file
            .metadata()
            .map_err(|e| CoreError::FailedPrecondition(format!("{path} cannot be read: {e}")))?;
        if !meta.is_file() {
            return Err(CoreError::InvalidArgument(format!(
                "{path} is not a file (!!screen shows the screen; `ls` in the session lists a directory)"
            )));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(CoreError::InvalidArgument(format!(
                "{path} has {} bytes; at most {} MiB are sent",
                meta.len(),
                MAX_FILE_BYTES >> 20
            )));
        }
        if !force && !rel.starts_with(SENT) && git_ignored(&dir, &rel).await {
            return Err(CoreError::FailedPrecondition(format!(
                "{path} is ignored by git (generated, or kept out of the repository on purpose): !!get --force {path} sends it anyway (admins)"
            )));
        }
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        let data = tokio::task::spawn_blocking(move || {
            let mut data = Vec::new();
            (&file)
                .take(MAX_FILE_BYTES)
                .read_to_end(&mut data)
                .map(|_| data)
        })
        .await
        .map_err(|e| CoreError::FailedPrecondition(format!("{path} cannot be read: {e}")))?
        .map_err(|e| CoreError::FailedPrecondition(format!("{path} cannot be read: {e}")))?;
        Ok(FileOut { name, data })
    }

    /// Stores a file from a chat in session `name`'s inbox (`.clibot/inbox/`), under a name
    /// that says when and cannot climb out; its path relative to the session's directory.
    pub async fn write_inbox(
        &self,
        name: &str,
        file_name: &str,
        data: Vec<u8>,
    ) -> Result<String, CoreError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let rec = self.get(name)?;
        self.refuse_unmanaged(&rec)?;
        if data.len() as u64 > MAX_FILE_BYTES {
            return Err(CoreError::InvalidArgument(format!(
                "the file has {} bytes; at most {} MiB are stored",
                data.len(),
                MAX_FILE_BYTES >> 20
            )));
        }
        let dir = rec.dir.canonicalize().map_err(|e| {
            CoreError::FailedPrecondition(format!(
                "{name}'s directory {} cannot be used: {e}",
                rec.dir.display()
            ))
        })?;
        let inbox = dir.join(INBOX);
        std::fs::create_dir_all(&inbox).map_err(|e| {
            CoreError::FailedPrecondition(format!(
                "{INBOX} cannot be made in {name}'s directory: {e}"
            ))
        })?;
        // A process in the session could have made the inbox a link to elsewhere.
        let real = inbox
            .canonicalize()
            .map_err(|e| CoreError::FailedPrecondition(format!("{INBOX}: {e}")))?;
        if real != dir.join(INBOX) {
            return Err(CoreError::PermissionDenied(format!(
                "{INBOX} in {name}'s directory leads elsewhere ({}): remove it and send the file again",
                real.display()
            )));
        }
        let stamp = crate::duration::stamp(crate::store::now_ms());
        let safe = safe_name(file_name);
        let data_len = data.len();
        let (file, stored) = (1..100)
            .find_map(|n| {
                let f = if n == 1 {
                    format!("{stamp}-{safe}")
                } else {
                    format!("{stamp}-{n}-{safe}")
                };
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc_o_nofollow())
                    .mode(0o600)
                    .open(real.join(&f))
                    .ok()
                    .map(|file| (file, f))
            })
            .ok_or_else(|| {
                CoreError::FailedPrecondition(format!("no new file can be made in {INBOX}"))
            })?;
        tokio::task::spawn_blocking(move || {
            let mut file = file;
            file.write_all(&data)?;
            file.sync_data()
        })
        .await
        .map_err(|e| CoreError::FailedPrecondition(format!("the file cannot be written: {e}")))?
        .map_err(|e| CoreError::FailedPrecondition(format!("the file cannot be written: {e}")))?;
        info!(session = name, file = %stored, bytes = data_len, "a file from a chat");
        Ok(format!("{INBOX}/{stored}"))
    }

    /// Looks into every running session's outbox: each file that has stopped growing since
    /// the last look is moved to `.clibot/sent/` (under a name that says when) and announced.
    pub(crate) async fn scan_outboxes(&self) {
        let dirs: Vec<(String, String, PathBuf)> = lock(&self.inner.sessions)
            .values()
            .filter(|e| !e.rec.state.is_exited() && !e.rec.unmanaged)
            .map(|e| (e.rec.name.clone(), e.rec.id.clone(), e.rec.dir.clone()))
            .collect();
        for (name, id, dir) in dirs {
            let outbox = dir.join(OUTBOX);
            let Ok(entries) = std::fs::read_dir(&outbox) else {
                continue;
            };
            let mut seen: Vec<(String, u64)> = Vec::new();
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let file = entry.file_name().to_string_lossy().into_owned();
                // Not a plain file (a symlink is not followed), or one being written (`.x.tmp`).
                if !meta.is_file() || file.starts_with('.') {
                    continue;
                }
                seen.push((file, meta.len()));
            }
            let ready: Vec<(String, u64)> = {
                let mut sessions = lock(&self.inner.sessions);
                let Some(e) = sessions.get_mut(&name) else {
                    continue;
                };
                // Ready: the same size as at the last look.
                let ready = seen
                    .iter()
                    .filter(|f| e.rt.outbox.contains(f))
                    .cloned()
                    .collect();
                e.rt.outbox = seen;
                ready
            };
            for (file, bytes) in ready {
                self.send_outbox_file(&name, &id, &dir, &file, bytes);
            }
        }
    }

    fn send_outbox_file(&self, name: &str, id: &str, dir: &Path, file: &str, bytes: u64) {
        let sent_dir = dir.join(SENT);
        if let Err(e) = std::fs::create_dir_all(&sent_dir) {
            warn!(session = name, "cannot make {}: {e}", sent_dir.display());
            return;
        }
        let stamp = crate::duration::stamp(crate::store::now_ms());
        let mut target = sent_dir.join(format!("{stamp}-{file}"));
        let mut n = 1;
        while target.exists() {
            n += 1;
            target = sent_dir.join(format!("{stamp}-{n}-{file}"));
        }
        if let Err(e) = std::fs::rename(dir.join(OUTBOX).join(file), &target) {
            warn!(session = name, "cannot move {file} out of the outbox: {e}");
            return;
        }
        if let Some(e) = lock(&self.inner.sessions).get_mut(name) {
            e.rt.outbox.retain(|(f, _)| f != file);
        }
        let rel = target
            .strip_prefix(dir)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        info!(
            session = name,
            file, bytes, "a file from the outbox goes to the chats"
        );
        self.event(
            name,
            id,
            EventKind::FileSent {
                name: file.to_string(),
                path: rel,
                bytes,
            },
        );
    }
}

/// `O_NOFOLLOW`: a name that is a symlink is not opened (Linux's value).
fn libc_o_nofollow() -> i32 {
    0o400000
}

/// A file name from a chat, made safe: letters, digits, `.`, `-` and `_` kept, the rest `_`;
/// no leading dot; at most 80 characters.
pub fn safe_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let mut s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    while s.starts_with('.') {
        s.remove(0);
    }
    let s: String = s
        .chars()
        .rev()
        .take(80)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if s.is_empty() { "file".into() } else { s }
}

/// Whether git ignores `rel` in `dir` (never where git cannot run safely: then it is not
/// known to be ignored).
async fn git_ignored(dir: &Path, rel: &Path) -> bool {
    let run = crate::automation::safe_git::command(dir)
        .args(["check-ignore", "-q", "--"])
        .arg(rel)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    matches!(
        tokio::time::timeout(Duration::from_secs(5), run).await,
        Ok(Ok(s)) if s.success()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_file_names_are_made_safe() {
        assert_eq!(safe_name("photo.jpg"), "photo.jpg");
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(safe_name("my report (1).pdf"), "my_report__1_.pdf");
        assert_eq!(safe_name(""), "file");
        assert_eq!(safe_name("..."), "file");
        assert_eq!(safe_name(&"x".repeat(300)).len(), 80);
    }

    #[test]
    fn names_that_hold_secrets_are_known() {
        for p in [
            ".env",
            "app/.env.production",
            "certs/server.pem",
            "keys/deploy.KEY",
            "home/id_ed25519",
            ".git/config",
            "x/.ssh/known_hosts",
            "db.kdbx",
        ] {
            assert!(secret_name(Path::new(p)).is_some(), "{p}");
        }
        for p in [
            "README.md",
            "src/main.rs",
            "env.md",
            "keyboard.rs",
            "out/report.pdf",
        ] {
            assert!(secret_name(Path::new(p)).is_none(), "{p}");
        }
    }
}
