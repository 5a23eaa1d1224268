//! What a jailed program needs of the machine besides the system: its own installation, the
//! interpreter its script names, and the links through which its name is found on the PATH.
//!
//! Why: the jail shows the system's directories and nothing of the user's home. A CLI
//! installed with npm under the home (`~/.npm-global`, an `nvm` Node.js, a project's
//! `node_modules`) or as a single binary (`~/.local/share/claude/versions/…`) must still run
//! there, so its installation is shown read-only — the npm prefix it lies in, the Node.js
//! installation it runs on, or the one binary — and the links that lead from its name on the
//! PATH to it are made again inside the jail, so the program starts exactly as it does outside.

use std::path::{Path, PathBuf};

/// The directories the jail shows of the system, read-only (a link among them is made again
/// as a link: `/bin -> usr/bin`).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
];

/// What the jail must show for a program to run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Needs {
    /// Shown read-only at the same place.
    pub read_only: Vec<PathBuf>,
    /// Links made in the jail: (target as the link has it, the link's path).
    pub links: Vec<(PathBuf, PathBuf)>,
}

impl Needs {
    fn add_dir(&mut self, p: PathBuf) {
        if !in_system(&p) && !self.read_only.iter().any(|r| p.starts_with(r)) {
            self.read_only.retain(|r| !r.starts_with(&p));
            self.read_only.push(p);
        }
    }
}

/// Whether `p` lies in a directory the jail shows anyway.
pub fn in_system(p: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| p.starts_with(d))
}

/// Where the program `name` is on `path` (a name with a `/` is taken as it is, relative to
/// `dir`): the first executable file, not resolved.
pub fn on_path(name: &str, path: &str, dir: &Path) -> Option<PathBuf> {
    if name.contains('/') {
        let p = dir.join(name);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// What running `argv` needs: its program's installation (found on `path`, links followed),
/// the installation of an interpreter the program's `#!` line names, and the installation of
/// any other argument that is an existing file (`node …/cli.js`).
pub fn needs(argv: &[String], path: &str, dir: &Path) -> Needs {
    let mut out = Needs::default();
    let Some(first) = argv.first() else {
        return out;
    };
    if let Some(p) = on_path(first, path, dir) {
        add_program(&mut out, &p, path, dir, 0);
    }
    for a in argv.iter().skip(1) {
        let p = Path::new(a);
        if p.is_absolute() && p.is_file() {
            add_program(&mut out, p, path, dir, 1);
        }
    }
    out
}

/// Adds what `program` (a path as found) needs; `depth` bounds interpreters of interpreters.
fn add_program(out: &mut Needs, program: &Path, path: &str, dir: &Path, depth: u32) {
    // The links from the name to the file, made again in the jail.
    let mut at = program.to_path_buf();
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&at) else {
            break;
        };
        let next = match at.parent() {
            Some(parent) if target.is_relative() => parent.join(&target),
            _ => target.clone(),
        };
        if !in_system(&at) && !out.links.iter().any(|(_, l)| *l == at) {
            out.links.push((target, at.clone()));
        }
        at = next;
    }
    let Ok(real) = program.canonicalize() else {
        return;
    };
    if let Some(root) = install_root(&real) {
        out.add_dir(root);
    }
    if depth < 2
        && let Some(interp) = interpreter(&real)
        && let Some(p) = on_path(&interp, path, dir)
    {
        add_program(out, &p, path, dir, depth + 1);
    }
}

/// The installation a real (resolved) program file belongs to: the npm prefix it lies in
/// (the folder holding its outermost `node_modules`), a Node.js installation (`bin/` beside
/// `lib/node_modules`), else the file alone. `None` for a system file.
pub fn install_root(real: &Path) -> Option<PathBuf> {
    if in_system(real) {
        return None;
    }
    let comps: Vec<_> = real.components().collect();
    if let Some(i) = comps.iter().position(|c| c.as_os_str() == "node_modules") {
        let prefix: PathBuf = comps[..i].iter().collect();
        return Some(prefix);
    }
    let parent = real.parent()?;
    if parent.file_name().is_some_and(|n| n == "bin")
        && let Some(top) = parent.parent()
        && top.join("lib/node_modules").is_dir()
    {
        return Some(top.to_path_buf());
    }
    Some(real.to_path_buf())
}

/// The program a script's `#!` line runs: the interpreter, or with `env` the name after it
/// (`#!/usr/bin/env node`, `#!/usr/bin/env -S node --x`).
pub fn interpreter(file: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interp = words.next()?;
    if Path::new(interp).file_name().is_some_and(|n| n == "env") {
        words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .map(str::to_string)
    } else {
        Some(interp.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn exe(p: &Path, body: &str) {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dirs");
        std::fs::write(p, body).expect("write");
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    #[test]
    fn an_npm_cli_needs_its_prefix_its_links_and_its_node() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().canonicalize().expect("canonical");
        let prefix = root.join("npm");
        exe(
            &prefix.join("node_modules/@x/cli/cli.js"),
            "#!/usr/bin/env node\n",
        );
        std::fs::create_dir_all(prefix.join("node_modules/.bin")).expect("bin");
        symlink("../@x/cli/cli.js", prefix.join("node_modules/.bin/xcli")).expect("link");
        let nodehome = root.join("nvm/v20");
        exe(&nodehome.join("bin/node"), "\x7fELF");
        std::fs::create_dir_all(nodehome.join("lib/node_modules")).expect("lib");
        let localbin = root.join("home/.local/bin");
        std::fs::create_dir_all(&localbin).expect("dir");
        symlink(prefix.join("node_modules/.bin/xcli"), localbin.join("xcli")).expect("link");
        let path = format!("{}:{}", localbin.display(), nodehome.join("bin").display());
        let n = needs(&["xcli".into(), "--flag".into()], &path, &root);
        assert!(n.read_only.contains(&prefix), "{n:?}");
        assert!(n.read_only.contains(&nodehome), "{n:?}");
        assert!(
            n.links
                .contains(&(prefix.join("node_modules/.bin/xcli"), localbin.join("xcli"))),
            "{n:?}"
        );
        assert!(
            n.links.contains(&(
                PathBuf::from("../@x/cli/cli.js"),
                prefix.join("node_modules/.bin/xcli")
            )),
            "{n:?}"
        );
    }

    #[test]
    fn a_lone_binary_is_shown_alone_and_system_programs_need_nothing() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().canonicalize().expect("canonical");
        let bin = root.join("share/claude/versions/2.1.0");
        exe(&bin, "\x7fELF");
        let n = needs(&[bin.display().to_string()], "/usr/bin", Path::new("/"));
        assert_eq!(n.read_only, vec![bin]);
        let n = needs(&["sh".into(), "-c".into()], "/usr/bin:/bin", Path::new("/"));
        assert_eq!(n, Needs::default());
    }

    #[test]
    fn interpreters_are_read_from_the_first_line() {
        let t = tempfile::tempdir().expect("tempdir");
        let f = t.path().join("s");
        std::fs::write(&f, "#!/usr/bin/env -S node --no-warnings\nx").expect("write");
        assert_eq!(interpreter(&f).as_deref(), Some("node"));
        std::fs::write(&f, "#!/opt/py/bin/python3 -u\n").expect("write");
        assert_eq!(interpreter(&f).as_deref(), Some("/opt/py/bin/python3"));
        std::fs::write(&f, "\x7fELF").expect("write");
        assert_eq!(interpreter(&f), None);
    }
}
