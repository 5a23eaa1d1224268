//! Where a non-admin's session works: under their member roots — by default a workspace of
//! their own below the data directory — never in the home, a dot-directory of it, the owner's
//! config or clibot's state, and never in (or above) the directory of a session that is not
//! theirs.
//!
//! Why not the allowed roots: those say where the machine's user lets sessions run, typically
//! the whole home. A member's session writes its directory, and whatever the owner's programs
//! read from there later (`~/.bashrc`, `~/.config/autostart`, another project's `.git/hooks`)
//! would run as the owner, outside any jail. So members get directories of their own.

use std::path::{Path, PathBuf};

use tracing::warn;

use crate::chat::access::PlatformAccess;
use crate::confine::policy::{member_workspace, unfit_member_root};
use crate::core::Daemon;
use crate::error::CoreError;
use crate::paths::expand_home;

impl Daemon {
    /// The directories member `owner` ("PLATFORM:USER") may work in, canonical, the first one
    /// where a session with no directory starts. The default workspace is made on first use.
    pub(crate) fn member_roots(
        &self,
        owner: &str,
        conf: &PlatformAccess,
    ) -> Result<Vec<PathBuf>, CoreError> {
        let (platform, user) = owner.split_once(':').unwrap_or(("", owner));
        let data = &self.settings().data_dir;
        let workspace = member_workspace(data, platform, user);
        let member = workspace
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(configured) = &conf.member_roots else {
            crate::paths::create_private_dir(&workspace).map_err(|source| CoreError::State {
                path: workspace.clone(),
                source,
            })?;
            let canon = workspace
                .canonicalize()
                .map_err(|_| CoreError::DirNotFound(workspace.clone()))?;
            return Ok(vec![canon]);
        };
        let home = expand_home(Path::new("~"));
        let home = home.canonicalize().unwrap_or(home);
        let mut owner_dirs =
            crate::confine::secrets::config_paths(self.settings().config_file.as_deref());
        owner_dirs.push(self.settings().state_dir.clone());
        let owner_dirs: Vec<PathBuf> = owner_dirs
            .into_iter()
            .map(|d| d.canonicalize().unwrap_or(d))
            .collect();
        let mut roots = Vec::new();
        for r in configured {
            let text = r.to_string_lossy().replace("{member}", &member);
            let r = expand_home(Path::new(&text));
            if text.contains(&member) && !r.exists() {
                let _ = crate::paths::create_private_dir(&r);
            }
            let Ok(canon) = r.canonicalize() else {
                continue; // not there (yet): no session can start in it
            };
            match unfit_member_root(&canon, &home, &owner_dirs) {
                Some(why) => warn!("[access.{platform}] member_roots: {why}; it is not used"),
                None => roots.push(canon),
            }
        }
        if roots.is_empty() {
            return Err(CoreError::NotMemberDir {
                dir: PathBuf::from("(none)"),
                roots: "no directory: none of [access.PLATFORM] member_roots exists or may be used; an admin can fix it (clibotctl doctor says why)"
                    .replace("PLATFORM", platform),
            });
        }
        Ok(roots)
    }

    /// Resolves a member's working directory: empty or `~` is their first root; a relative
    /// one (or `~/x`) lies below it and is made there when missing. Refused: outside their
    /// roots, in a secret path, or in or above another owner's session's directory.
    pub(crate) fn member_dir(
        &self,
        owner: &str,
        conf: &PlatformAccess,
        requested: &str,
    ) -> Result<PathBuf, CoreError> {
        let roots = self.member_roots(owner, conf)?;
        let first = &roots[0];
        let req = requested.trim();
        let raw = if req.is_empty() || req == "~" {
            first.clone()
        } else if let Some(rest) = req.strip_prefix("~/") {
            first.join(rest)
        } else if Path::new(req).is_absolute() {
            PathBuf::from(req)
        } else {
            first.join(req)
        };
        let shown = |p: &[PathBuf]| {
            p.iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        // A new directory below one of their roots is made, beneath it with no link followed.
        if !raw.exists()
            && let Some(root) = roots.iter().find(|r| raw.starts_with(r))
            && let Ok(rest) = raw.strip_prefix(root)
        {
            let made = crate::confine::beneath::Dir::open(root)
                .and_then(|d| d.create_dir_all(rest, 0o700));
            if let Err(e) = made {
                return Err(CoreError::SessionFiles(e));
            }
        }
        let dir = raw
            .canonicalize()
            .map_err(|_| CoreError::DirNotFound(raw.clone()))?;
        if !dir.is_dir() {
            return Err(CoreError::NotADirectory(dir));
        }
        if !roots.iter().any(|r| dir.starts_with(r)) {
            return Err(CoreError::NotMemberDir {
                dir,
                roots: shown(&roots),
            });
        }
        if let Some(secret) = crate::confine::secrets::secret_containing(
            &dir,
            self.secret_paths(),
            &self.live().lifted_secrets,
        ) {
            return Err(CoreError::SecretDir { dir, secret });
        }
        // Another's session below this directory would be in reach; so would one that
        // holds it, when that one lies in the member's roots too (a shared team root). A
        // session of the machine's user in the home above the workspace is neither.
        let others = self.sessions().any(|e| {
            let d = &e.rec.dir;
            e.rec.owner != owner
                && !d.as_os_str().is_empty()
                && (d.starts_with(&dir)
                    || (dir.starts_with(d) && roots.iter().any(|r| d.starts_with(r))))
        });
        if others {
            return Err(CoreError::OthersDir { dir });
        }
        Ok(dir)
    }
}
