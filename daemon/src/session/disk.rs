//! What a non-admin's jailed session keeps on disk, watched: its directory and its own home
//! together may hold at most `[access.PLATFORM] jail_disk`; a session over it is stopped, kept
//! (so that `restart` brings it back once space is freed), and its chats are told why.
//!
//! Why a watched limit and not a quota: disk quotas need root and a file system set up for
//! them, and a jail's `/tmp` is already a size-limited tmpfs. The watch counts the blocks
//! files really take (a sparse file costs what it holds), walks without following links, and
//! is bounded in how many entries it looks at, so it cannot be made slow by the session.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::core::Daemon;

/// How often the jailed sessions' use of the disk is measured: fifteen safety-net periods
/// (`[daemon] poll_interval_ms`), 30 s at the default, never more often than every 3 s.
fn disk_check_every(poll_ms: u64) -> Duration {
    Duration::from_millis(poll_ms.saturating_mul(15))
        .clamp(Duration::from_secs(3), Duration::from_secs(30))
}
/// The most entries one measurement looks at; a tree with more counts as over any limit.
const MAX_ENTRIES: usize = 2_000_000;

/// The bytes the files below `roots` take on disk (allocated blocks), links not followed;
/// `None` when there are more than [`MAX_ENTRIES`] entries.
pub fn disk_use(roots: &[PathBuf]) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut seen = 0usize;
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return None;
            }
            // `DirEntry::metadata` does not follow a link.
            let Ok(m) = e.metadata() else { continue };
            total = total.saturating_add(m.blocks().saturating_mul(512));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    Some(total)
}

impl Daemon {
    /// Measures every running jailed session's use of the disk now and then (see
    /// `disk_check_every`) until `shutdown`.
    pub async fn run_disk_watch(self, shutdown: CancellationToken) {
        let every = disk_check_every(self.settings().config.daemon.poll_interval_ms);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(every) => self.check_jail_disk().await,
            }
        }
    }

    /// One measurement: each running jailed session over its platform's `jail_disk` is
    /// stopped and kept, with the reason.
    async fn check_jail_disk(&self) {
        let state = self.settings().state_dir.clone();
        let jailed: Vec<(String, String, PathBuf, String)> = self.sessions().filter_map(|e| {
            (!e.rec.jail_home.is_empty() && !e.rec.state.is_exited() && !e.stopping).then(|| {
                (
                    e.rec.name.clone(),
                    e.rec.id.clone(),
                    e.rec.dir.clone(),
                    e.rec.owner.clone(),
                )
            })
        });
        for (name, id, dir, owner) in jailed {
            let Some(conf) = self.non_admin(&owner) else {
                continue;
            };
            let limit = conf.jail_disk.0;
            let roots = vec![dir, state.join("jails").join(&id).join("home")];
            let used = tokio::task::spawn_blocking(move || disk_use(&roots))
                .await
                .ok()
                .flatten();
            let over = used.is_none_or(|u| u > limit);
            if !over {
                continue;
            }
            let said = match used {
                Some(u) => crate::confine::policy::format_bytes(u),
                None => "too many files to count".into(),
            };
            let reason = format!(
                "its directory and home hold {said}, over the {} this machine allows a member's session ([access.PLATFORM] jail_disk): stopped; free space in its directory, then !!restart {name}",
                crate::confine::policy::format_bytes(limit)
            );
            warn!(session = %name, "{reason}");
            self.stop_over_disk(&name, &reason).await;
        }
    }

    /// Stops session `name` and keeps it, exited with `reason` (told to its chats).
    async fn stop_over_disk(&self, name: &str, reason: &str) {
        let rec = self.sessions().update(name, |e| {
            if e.stopping {
                return None;
            }
            e.stopping = true;
            Some(e.rec.clone())
        });
        let Some(rec) = rec.flatten() else {
            return;
        };
        self.stop_watcher(name);
        let stopped = self.stop_inner(&rec, true, None).await;
        self.sessions().unreserve(name);
        let status = stopped.ok().and_then(|o| o.exit_status);
        self.mark_exited(name, status, reason);
        self.notice(name, "disk", reason);
        self.persist();
        info!(session = %name, "stopped: over its disk limit");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_counts_blocks_not_sizes_and_follows_no_link() {
        let t = tempfile::tempdir().expect("tempdir");
        let a = t.path().join("a");
        std::fs::create_dir_all(a.join("sub")).expect("dirs");
        std::fs::write(a.join("sub/f"), vec![1u8; 64 * 1024]).expect("write");
        let sparse = std::fs::File::create(a.join("sparse")).expect("create");
        sparse.set_len(10 << 30).expect("sparse");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&outside).expect("dir");
        std::fs::write(outside.join("big"), vec![1u8; 1 << 20]).expect("write");
        std::os::unix::fs::symlink(&outside, a.join("link")).expect("link");
        let used = disk_use(&[a]).expect("counted");
        assert!(used >= 64 * 1024, "{used}");
        assert!(
            used < 1 << 20,
            "no sparse gigabytes, nothing through the link: {used}"
        );
    }
}
