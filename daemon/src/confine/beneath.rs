//! Files the unjailed daemon reaches in places a session can change: reached from a directory
//! handle, never through a link.
//!
//! Why: a session's directory, its own home and its files are writable by the session, jailed
//! or not. A path the daemon builds there by joining names (`DIR/.clibot/outbox/x`) is resolved
//! by the kernel at the moment of use, so a link planted in any component — `outbox -> ~/.ssh` —
//! or swapped in between a check and the use, makes the daemon (which runs as the user, with
//! none of the jail's walls) read, write, rename or chmod what the link points at. Here every
//! path is resolved beneath a held directory handle with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)` (component by component with `O_NOFOLLOW` on kernels before 5.6):
//! no component may be a link, none may climb out. A file is first opened as a path only
//! (`O_PATH`, which never blocks on a FIFO nor wakes a device), checked to be a regular file by
//! `fstat`, then opened for reading through that very handle, so nothing can be swapped in
//! between. Writes go to a new file made beside the target and renamed over it (a rename
//! replaces a link, never follows it). Modes are set on the open file, never by path.
//!
//! Everything here blocks: callers on the async runtime go through [`blocking`], which runs
//! the work on the blocking pool with a time limit.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// Why a path beneath a directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    #[error(
        "{0} is, or passes through, a symbolic link: clibot does not follow links in a session's files (remove the link and try again)"
    )]
    Link(PathBuf),
    #[error("{0} is {1}, not a regular file: only regular files are read or written")]
    NotRegular(PathBuf, &'static str),
    #[error("{0} is not a directory")]
    NotDirectory(PathBuf),
    #[error("{path} has {len} bytes; at most {max} are read")]
    TooBig { path: PathBuf, len: u64, max: u64 },
    #[error("{0} is not a plain relative path (no `..`, no leading `/`)")]
    BadPath(PathBuf),
    #[error("{0} does not exist")]
    NotFound(PathBuf),
    #[error("{0} took too long (the disk, or a file system that does not answer)")]
    TimedOut(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl BeneathError {
    fn io(path: &Path, e: impl Into<std::io::Error>) -> BeneathError {
        let source: std::io::Error = e.into();
        match source.raw_os_error() {
            Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => {
                BeneathError::Link(path.to_path_buf())
            }
            Some(code) if code == rustix::io::Errno::XDEV.raw_os_error() => {
                BeneathError::BadPath(path.to_path_buf())
            }
            _ if source.kind() == std::io::ErrorKind::NotFound => {
                BeneathError::NotFound(path.to_path_buf())
            }
            _ => BeneathError::Io {
                path: path.to_path_buf(),
                source,
            },
        }
    }

    /// Whether it says that nothing is there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, BeneathError::NotFound(_))
    }
}

type Result<T> = std::result::Result<T, BeneathError>;

/// The longest any one blocking file operation of the daemon's may take.
pub const IO_TIME_LIMIT: Duration = Duration::from_secs(10);

/// Runs `f` on the blocking pool, giving up after [`IO_TIME_LIMIT`] (the thread is left to
/// finish; the caller goes on). `what` names the work in the error.
pub async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match tokio::time::timeout(IO_TIME_LIMIT, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(BeneathError::Io {
            path: PathBuf::from(what),
            source: std::io::Error::other(e),
        }),
        Err(_) => Err(BeneathError::TimedOut(what.to_string())),
    }
}

/// What kind of entry a directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    Other,
}

/// An entry of a directory: its name, kind and (for a regular file) size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
    pub len: u64,
}

/// A held directory: every path below it is resolved beneath it, with no link followed.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Socket => "a socket",
        FileType::Symlink => "a symbolic link",
        FileType::Directory => "a directory",
        _ => "not a regular file",
    }
}

/// Checks that `rel` is relative and plain: no root, no `..`; `.` components are dropped.
fn plain(rel: &Path) -> Result<PathBuf> {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return Err(BeneathError::BadPath(rel.to_path_buf())),
        }
    }
    Ok(out)
}

const NO_LINKS: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

impl Dir {
    /// Opens the absolute directory `path`, refusing a link in any of its components (a
    /// session's directory is kept canonical, so a link there is one planted since).
    pub fn open(path: &Path) -> Result<Dir> {
        if !path.is_absolute() {
            return Err(BeneathError::BadPath(path.to_path_buf()));
        }
        let root = rustix::fs::open(
            "/",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| BeneathError::io(Path::new("/"), e))?;
        let rel = path.strip_prefix("/").unwrap_or(path);
        let root = Dir {
            fd: root,
            path: PathBuf::from("/"),
        };
        let mut d = root.open_dir(rel)?;
        d.path = path.to_path_buf();
        Ok(d)
    }

    /// Pins the absolute path `path` — a directory or a file — as a path-only descriptor,
    /// refusing a link in any component, the last included (for `bwrap --bind-fd`, so that
    /// what is bound is what was checked).
    pub fn pin(path: &Path) -> Result<OwnedFd> {
        let parent = path
            .parent()
            .ok_or_else(|| BeneathError::BadPath(path.to_path_buf()))?;
        let name = path
            .file_name()
            .ok_or_else(|| BeneathError::BadPath(path.to_path_buf()))?;
        let dir = Dir::open(parent)?;
        let fd = dir.open_beneath(Path::new(name), OFlags::PATH, Mode::empty())?;
        let st = rustix::fs::fstat(&fd).map_err(|e| BeneathError::io(path, e))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            return Err(BeneathError::Link(path.to_path_buf()));
        }
        Ok(fd)
    }

    /// Where this directory was opened (for messages; never used to reach it again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    /// `openat2` beneath this directory with no link followed; component by component with
    /// `O_NOFOLLOW` where the kernel has no `openat2`.
    fn open_beneath(&self, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd> {
        let rel = plain(rel)?;
        let target = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel.as_path()
        };
        // `openat2` refuses with `O_PATH` every flag but these three.
        let mut flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        if !flags.contains(OFlags::PATH) {
            flags |= OFlags::NOCTTY;
        }
        match rustix::fs::openat2(&self.fd, target, flags, mode, NO_LINKS) {
            Ok(fd) => Ok(fd),
            Err(e) if e == rustix::io::Errno::NOSYS || e == rustix::io::Errno::PERM => {
                self.walk(&rel, flags, mode)
            }
            Err(e) => Err(BeneathError::io(&self.shown(&rel), e)),
        }
    }

    /// The fallback of [`Dir::open_beneath`]: each directory opened `O_PATH | O_NOFOLLOW` and
    /// checked to be a directory before the next name is looked up in it.
    fn walk(&self, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd> {
        let names: Vec<&std::ffi::OsStr> = rel.iter().collect();
        let Some((last, dirs)) = names.split_last() else {
            return rustix::fs::openat(&self.fd, ".", flags, mode)
                .map_err(|e| BeneathError::io(&self.path, e));
        };
        let mut at: Option<OwnedFd> = None;
        let mut shown = self.path.clone();
        for name in dirs {
            shown.push(name);
            let base = at.as_ref().map(|f| f.as_fd()).unwrap_or(self.fd.as_fd());
            let fd = rustix::fs::openat(
                base,
                *name,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| BeneathError::io(&shown, e))?;
            let st = rustix::fs::fstat(&fd).map_err(|e| BeneathError::io(&shown, e))?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => at = Some(fd),
                FileType::Symlink => return Err(BeneathError::Link(shown)),
                _ => return Err(BeneathError::NotDirectory(shown)),
            }
        }
        shown.push(last);
        let base = at.as_ref().map(|f| f.as_fd()).unwrap_or(self.fd.as_fd());
        rustix::fs::openat(base, *last, flags, mode).map_err(|e| BeneathError::io(&shown, e))
    }

    /// The directory `rel` below this one.
    pub fn open_dir(&self, rel: &Path) -> Result<Dir> {
        // Not `O_DIRECTORY`: a link as the last name then comes back as itself, and is named.
        let fd = self.open_beneath(rel, OFlags::PATH, Mode::empty())?;
        let st = rustix::fs::fstat(&fd).map_err(|e| BeneathError::io(&self.shown(rel), e))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {}
            FileType::Symlink => return Err(BeneathError::Link(self.shown(rel))),
            _ => return Err(BeneathError::NotDirectory(self.shown(rel))),
        }
        Ok(Dir {
            fd,
            path: self.shown(rel),
        })
    }

    /// The directory `rel` below this one, made (mode `mode`) where missing, with its parents.
    pub fn create_dir_all(&self, rel: &Path, mode: u32) -> Result<Dir> {
        let rel = plain(rel)?;
        let mut d = Dir {
            fd: self
                .fd
                .try_clone()
                .map_err(|e| BeneathError::io(&self.path, e))?,
            path: self.path.clone(),
        };
        for name in rel.iter() {
            match rustix::fs::mkdirat(&d.fd, name, Mode::from_raw_mode(mode)) {
                Ok(()) => {}
                Err(e) if e == rustix::io::Errno::EXIST => {}
                Err(e) => return Err(BeneathError::io(&d.path.join(name), e)),
            }
            d = d.open_dir(Path::new(name))?;
        }
        Ok(d)
    }

    /// What `rel` is, without following it.
    pub fn kind(&self, rel: &Path) -> Result<(Kind, u64)> {
        let fd = self.open_beneath(rel, OFlags::PATH, Mode::empty());
        let fd = match fd {
            Err(BeneathError::Link(p)) if p == self.shown(&plain(rel)?) => {
                return Ok((Kind::Link, 0));
            }
            other => other?,
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| BeneathError::io(&self.shown(rel), e))?;
        Ok(match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => (Kind::File, st.st_size.max(0) as u64),
            FileType::Directory => (Kind::Dir, 0),
            FileType::Symlink => (Kind::Link, 0),
            _ => (Kind::Other, 0),
        })
    }

    /// Whether `rel` exists (a link counts: it is there, though never followed).
    pub fn exists(&self, rel: &Path) -> bool {
        self.kind(rel).is_ok()
    }

    /// Opens the regular file `rel` for reading; refuses anything else. Returns it with its
    /// size; a file over `max` bytes is refused.
    pub fn open_file(&self, rel: &Path, max: u64) -> Result<(std::fs::File, u64)> {
        let shown = self.shown(rel);
        let pinned = self.open_beneath(rel, OFlags::PATH, Mode::empty())?;
        let st = rustix::fs::fstat(&pinned).map_err(|e| BeneathError::io(&shown, e))?;
        let t = FileType::from_raw_mode(st.st_mode);
        if t != FileType::RegularFile {
            return Err(if t == FileType::Symlink {
                BeneathError::Link(shown)
            } else {
                BeneathError::NotRegular(shown, kind_name(t))
            });
        }
        let len = st.st_size.max(0) as u64;
        if len > max {
            return Err(BeneathError::TooBig {
                path: shown,
                len,
                max,
            });
        }
        // Opened again through the pinned handle itself: the very inode just checked.
        let fd = rustix::fs::openat(
            rustix::fs::CWD,
            format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&pinned)),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|e| BeneathError::io(&shown, e))?;
        Ok((std::fs::File::from(fd), len))
    }

    /// The whole of the regular file `rel`, at most `max` bytes (a larger one is refused).
    pub fn read(&self, rel: &Path, max: u64) -> Result<Vec<u8>> {
        let (file, len) = self.open_file(rel, max)?;
        let mut data = Vec::with_capacity(len.min(max) as usize);
        file.take(max)
            .read_to_end(&mut data)
            .map_err(|e| BeneathError::io(&self.shown(rel), e))?;
        Ok(data)
    }

    /// The last `max` bytes at most of the regular file `rel` (a transcript that grew long:
    /// its end is what matters), with whether anything before them was left out.
    pub fn read_tail(&self, rel: &Path, max: u64) -> Result<(Vec<u8>, bool)> {
        use std::io::{Seek, SeekFrom};
        let (mut file, len) = self.open_file(rel, u64::MAX)?;
        let skip = len.saturating_sub(max);
        if skip > 0 {
            file.seek(SeekFrom::Start(skip))
                .map_err(|e| BeneathError::io(&self.shown(rel), e))?;
        }
        let mut data = Vec::with_capacity(len.min(max) as usize);
        file.take(max)
            .read_to_end(&mut data)
            .map_err(|e| BeneathError::io(&self.shown(rel), e))?;
        Ok((data, skip > 0))
    }

    /// Writes `data` as the file `rel` (mode `mode`): a new file beside it, renamed over it,
    /// so a link or a file the session put there is replaced, never written through.
    pub fn write(&self, rel: &Path, data: &[u8], mode: u32) -> Result<()> {
        let rel = plain(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        let mut n = 0u32;
        let (file, tmp) = loop {
            let tmp = format!(".clibot-{}-{n}.tmp", std::process::id());
            match rustix::fs::openat(
                &dir.fd,
                tmp.as_str(),
                OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC
                    | OFlags::NOCTTY,
                Mode::from_raw_mode(mode),
            ) {
                Ok(fd) => break (std::fs::File::from(fd), tmp),
                Err(e) if e == rustix::io::Errno::EXIST && n < 100 => n += 1,
                Err(e) => return Err(BeneathError::io(&dir.path.join(&tmp), e)),
            }
        };
        let written = (|| {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            let mut f = &file;
            f.write_all(data)?;
            std::io::Result::Ok(())
        })();
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(&dir.fd, tmp.as_str(), &dir.fd, name).map_err(Into::into)
        });
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(&dir.fd, tmp.as_str(), AtFlags::empty());
            return Err(BeneathError::io(&self.shown(&rel), e));
        }
        Ok(())
    }

    /// Makes the new file `rel` (it must not exist; mode `mode`) and returns it for writing.
    pub fn create_new(&self, rel: &Path, mode: u32) -> Result<std::fs::File> {
        let fd = self.open_beneath(
            rel,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(mode),
        )?;
        Ok(std::fs::File::from(fd))
    }

    /// Copies the regular file `rel` of `self` (at most `max` bytes) to `to` in `dest`.
    pub fn copy_to(&self, rel: &Path, dest: &Dir, to: &Path, max: u64, mode: u32) -> Result<()> {
        let data = self.read(rel, max)?;
        dest.write(to, &data, mode)
    }

    /// Makes `rel` a symbolic link to `target`, replacing a file or link there (never a
    /// directory). The link is for the session to follow, not the daemon.
    pub fn symlink(&self, target: &Path, rel: &Path) -> Result<()> {
        let rel = plain(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        match rustix::fs::unlinkat(&dir.fd, name, AtFlags::empty()) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::NOENT => {}
            Err(e) => return Err(BeneathError::io(&self.shown(&rel), e)),
        }
        rustix::fs::symlinkat(target, &dir.fd, name)
            .map_err(|e| BeneathError::io(&self.shown(&rel), e))
    }

    /// The target of the link `rel`, if it is one.
    pub fn read_link(&self, rel: &Path) -> Option<PathBuf> {
        let rel = plain(rel).ok()?;
        let (parent, name) = split(&rel).ok()?;
        let dir = self.open_dir(parent).ok()?;
        rustix::fs::readlinkat(&dir.fd, name, Vec::new())
            .ok()
            .map(|c| PathBuf::from(std::ffi::OsStr::from_bytes(c.as_bytes())))
    }

    /// Renames `from` (below `self`) to `to` (below `dest`); neither is followed if a link.
    pub fn rename(&self, from: &Path, dest: &Dir, to: &Path) -> Result<()> {
        let from = plain(from)?;
        let to = plain(to)?;
        let (fp, fname) = split(&from)?;
        let (tp, tname) = split(&to)?;
        let fd = self.open_dir(fp)?;
        let td = dest.open_dir(tp)?;
        rustix::fs::renameat(&fd.fd, fname, &td.fd, tname)
            .map_err(|e| BeneathError::io(&self.shown(&from), e))
    }

    /// Removes the file or link `rel` (not a directory).
    pub fn remove_file(&self, rel: &Path) -> Result<()> {
        let rel = plain(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        rustix::fs::unlinkat(&dir.fd, name, AtFlags::empty())
            .map_err(|e| BeneathError::io(&self.shown(&rel), e))
    }

    /// Sets the mode of the directory or regular file `rel`, on the open file itself.
    pub fn chmod(&self, rel: &Path, mode: u32) -> Result<()> {
        let shown = self.shown(rel);
        let (kind, _) = self.kind(rel)?;
        let flags = match kind {
            Kind::Dir => OFlags::RDONLY | OFlags::DIRECTORY,
            Kind::File => {
                let (f, _) = self.open_file(rel, u64::MAX)?;
                return rustix::fs::fchmod(&f, Mode::from_raw_mode(mode))
                    .map_err(|e| BeneathError::io(&shown, e));
            }
            Kind::Link => return Err(BeneathError::Link(shown)),
            Kind::Other => return Err(BeneathError::NotRegular(shown, "not a regular file")),
        };
        let fd = self.open_beneath(rel, flags, Mode::empty())?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| BeneathError::io(&shown, e))
    }

    /// The entries of the directory `rel` (`.` and `..` left out), links reported as links.
    pub fn entries(&self, rel: &Path) -> Result<Vec<Entry>> {
        let shown = self.shown(rel);
        let fd = self.open_beneath(rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        let mut dir = rustix::fs::Dir::new(fd).map_err(|e| BeneathError::io(&shown, e))?;
        let listing = self.open_dir(rel)?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| BeneathError::io(&shown, e))?;
            let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes()).to_os_string();
            if name == "." || name == ".." {
                continue;
            }
            let (kind, len) = listing.kind(Path::new(&name)).unwrap_or((Kind::Other, 0));
            out.push(Entry { name, kind, len });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// `rel` as (its parent, its last name).
fn split(rel: &Path) -> Result<(&Path, &std::ffi::OsStr)> {
    match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) => Ok((p, n)),
        _ => Err(BeneathError::BadPath(rel.to_path_buf())),
    }
}

/// Folders whose every child is one jailed session's area (the state directory's `jails`),
/// and single areas (a jailed session's files, `sessions/ID`): writable by that session's jail,
/// so a record below one is read beneath the area with no link followed. A session that runs
/// unjailed is not confined: it can do anything the user can, and the links clibot itself
/// makes in its files (a CLI's per-session home) are followed.
static CONFINED: std::sync::RwLock<(Vec<PathBuf>, Vec<PathBuf>)> =
    std::sync::RwLock::new((Vec::new(), Vec::new()));

/// Registers `folder` as one whose children are jailed sessions' areas (see [`read_record`]).
pub fn confine_below(folder: PathBuf) {
    let mut c = CONFINED.write().unwrap_or_else(|p| p.into_inner());
    if !c.0.contains(&folder) {
        c.0.push(folder);
    }
}

/// Registers `area` as a jailed session's (see [`read_record`]).
pub fn confine_area(area: PathBuf) {
    let mut c = CONFINED.write().unwrap_or_else(|p| p.into_inner());
    if !c.1.contains(&area) {
        c.1.push(area);
    }
}

/// The session area `path` lies in, as (the area, the rest below it), if it lies in one.
fn confined_area(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let c = CONFINED.read().unwrap_or_else(|p| p.into_inner());
    let folder = c.0.iter().find_map(|folder| {
        let rest = path.strip_prefix(folder).ok()?;
        let mut parts = rest.components();
        let first = parts.next()?;
        Some((folder.join(first), parts.as_path().to_path_buf()))
    });
    folder.or_else(|| {
        c.1.iter().find_map(|area| {
            let rest = path.strip_prefix(area).ok()?;
            Some((area.clone(), rest.to_path_buf()))
        })
    })
}

/// Opens a record a CLI keeps (a transcript, an events file) for reading: in a session's area
/// beneath it with no link followed; elsewhere (a file the user's own, unjailed CLI named)
/// following links as that CLI does — but always a regular file only, never a FIFO or a device.
fn open_record(path: &Path) -> Result<(std::fs::File, u64)> {
    if let Some((area, rest)) = confined_area(path) {
        return Dir::open(&area)?.open_file(&rest, u64::MAX);
    }
    let pinned = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| BeneathError::io(path, e))?;
    let st = rustix::fs::fstat(&pinned).map_err(|e| BeneathError::io(path, e))?;
    let t = FileType::from_raw_mode(st.st_mode);
    if t != FileType::RegularFile {
        return Err(BeneathError::NotRegular(path.to_path_buf(), kind_name(t)));
    }
    let fd = rustix::fs::openat(
        rustix::fs::CWD,
        format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&pinned)),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| BeneathError::io(path, e))?;
    Ok((std::fs::File::from(fd), st.st_size.max(0) as u64))
}

/// The whole record at `path` as text, refused over `max` bytes (a document that must be read
/// whole: a JSON file).
pub fn read_record(path: &Path, max: u64) -> Result<String> {
    let (file, len) = open_record(path)?;
    if len > max {
        return Err(BeneathError::TooBig {
            path: path.to_path_buf(),
            len,
            max,
        });
    }
    let mut data = Vec::with_capacity(len as usize);
    file.take(max)
        .read_to_end(&mut data)
        .map_err(|e| BeneathError::io(path, e))?;
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// The end of the line-oriented record at `path` as text: its last `max` bytes at most, from
/// the first whole line in them (a transcript that grew long: its end holds the last turn).
pub fn read_record_tail(path: &Path, max: u64) -> Result<String> {
    use std::io::{Seek, SeekFrom};
    let (mut file, len) = open_record(path)?;
    let skip = len.saturating_sub(max);
    if skip > 0 {
        file.seek(SeekFrom::Start(skip))
            .map_err(|e| BeneathError::io(path, e))?;
    }
    let mut data = Vec::with_capacity(len.min(max) as usize);
    file.take(max)
        .read_to_end(&mut data)
        .map_err(|e| BeneathError::io(path, e))?;
    if skip > 0 {
        let cut = data
            .iter()
            .position(|b| *b == b'\n')
            .map_or(data.len(), |i| i + 1);
        data.drain(..cut);
    }
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// The beginning of the record at `path` as text: its first `max` bytes at most (a record
/// whose first line says what it is).
pub fn read_record_head(path: &Path, max: u64) -> Result<String> {
    let (file, len) = open_record(path)?;
    let mut data = Vec::with_capacity(len.min(max) as usize);
    file.take(max)
        .read_to_end(&mut data)
        .map_err(|e| BeneathError::io(path, e))?;
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// The most of a transcript read to find a turn's reply (its end).
pub const TRANSCRIPT_TAIL: u64 = 32 << 20;
/// The largest record read whole (a JSON document).
pub const RECORD_MAX: u64 = 64 << 20;

/// The absolute path `path` split at `root`: the held `root` and the rest below it. `None`
/// when `path` does not lie below `root` (compared by name: both are the daemon's own, kept
/// canonical).
pub fn below<'a>(root: &Path, path: &'a Path) -> Option<&'a Path> {
    path.strip_prefix(root).ok()
}

#[cfg(test)]
mod tests;
