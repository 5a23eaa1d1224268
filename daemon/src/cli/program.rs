//! Finding the program a CLI runs the way its tmux session will, before the session exists: a
//! missing `claude` must be a clear error at spawn, not a session that dies a moment later
//! with nothing said.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a program cannot be started.
#[derive(Debug, PartialEq)]
pub enum Missing {
    /// Nothing of that name on the search path (or at that path).
    NotFound,
    /// It exists but is not an executable file.
    NotExecutable(PathBuf),
}

/// Resolves `program` as `execvp` would with `PATH=path`, in working directory `dir`: a name
/// with a `/` is a path (relative to `dir`), any other is looked up in each directory of `path`.
pub fn find(program: &str, path: &str, dir: &Path) -> Result<PathBuf, Missing> {
    if program.is_empty() {
        return Err(Missing::NotFound);
    }
    if program.contains('/') {
        let p = dir.join(program);
        return match executable(&p) {
            Some(true) => Ok(p),
            Some(false) => Err(Missing::NotExecutable(p)),
            None => Err(Missing::NotFound),
        };
    }
    let mut not_executable = None;
    for d in path.split(':') {
        // An empty entry means the current directory, as for execvp.
        let base = if d.is_empty() { dir } else { Path::new(d) };
        let p = base.join(program);
        match executable(&p) {
            Some(true) => return Ok(p),
            Some(false) => {
                not_executable.get_or_insert(p);
            }
            None => {}
        }
    }
    Err(not_executable.map_or(Missing::NotFound, Missing::NotExecutable))
}

/// `None`: no such file; `Some(false)`: a directory, or a file without any execute bit.
fn executable(p: &Path) -> Option<bool> {
    let m = std::fs::metadata(p).ok()?;
    Some(m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_on_the_path_and_by_path() {
        let d = tempfile::tempdir().expect("tempdir");
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).expect("mkdir");
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let plain = bin.join("plain");
        std::fs::write(&plain, "x").expect("write");
        let path = format!("/nonexistent:{}", bin.display());
        assert_eq!(find("tool", &path, d.path()), Ok(tool.clone()));
        assert_eq!(
            find("bin/tool", "", d.path()),
            Ok(d.path().join("bin/tool"))
        );
        assert_eq!(
            find(&tool.display().to_string(), "", Path::new("/")),
            Ok(tool.clone())
        );
        assert_eq!(find("nope", &path, d.path()), Err(Missing::NotFound));
        assert_eq!(
            find("plain", &path, d.path()),
            Err(Missing::NotExecutable(plain))
        );
        assert_eq!(
            find("bin", &d.path().display().to_string(), d.path()),
            Err(Missing::NotExecutable(bin))
        );
        assert_eq!(find("", &path, d.path()), Err(Missing::NotFound));
    }
}
