//! The dangers: commands that are never answered without a person, whatever the rules say.
//!
//! Each check reads the parsed words, so spelling does not matter: `rm -r -f`, `rm --force
//! --recursive`, `rm ~ -rf` and `/bin/rm -Rf` are the same command here.

use std::path::{Path, PathBuf};

use super::GuardContext;
use super::commands::{PRIVILEGE, base, find_exec, inner_start, is_download, is_writer, runs_code};
use super::parse::{Base, RedirectKind, Scanned, Word};
use super::paths;

/// Commands that erase a disk or a file beyond recovery.
const DESTROYERS: &[&str] = &[
    "shred", "wipefs", "mke2fs", "mkswap", "fdisk", "sfdisk", "parted",
];

/// The first danger in a list of commands run in order from the session's directory.
pub(crate) fn check_list(cmds: &[Scanned], ctx: &GuardContext) -> Option<String> {
    let mut cwds = vec![Some(ctx.session_dir.to_path_buf())];
    check_in(cmds, &mut cwds, ctx)
}

/// `cwds`: every directory the shell may be in at this point (`None`: not known), because a
/// `cd` that fails leaves the shell where it was.
fn check_in(
    cmds: &[Scanned],
    cwds: &mut Vec<Option<PathBuf>>,
    ctx: &GuardContext,
) -> Option<String> {
    for (i, s) in cmds.iter().enumerate() {
        // Substitutions run before the command that holds them.
        if let Some(why) = check_in(&s.nested, &mut cwds.clone(), ctx) {
            return Some(why);
        }
        let words = &s.cmd.words;
        if runs_code(words) {
            let piped = cmds[..i]
                .iter()
                .any(|p| p.cmd.pipeline == s.cmd.pipeline && fetches(&p.cmd.words));
            if piped {
                return Some("a download piped into a shell or an interpreter".into());
            }
            if s.nested.iter().any(fetches_deep) {
                return Some("a download run by a shell or an interpreter".into());
            }
        }
        for r in &s.cmd.redirects {
            if matches!(r.kind, RedirectKind::Write | RedirectKind::Append)
                && let Some(why) = paths::check_word(&r.target, cwds, ctx)
            {
                return Some(format!("a write to {why}"));
            }
        }
        if let Some(why) = danger(words, cwds, ctx) {
            return Some(why);
        }
        change_dir(words, cwds, ctx);
    }
    None
}

fn fetches(words: &[Word]) -> bool {
    let Some(first) = words.first() else {
        return false;
    };
    is_download(&first.text) || inner_start(words).is_some_and(|i| fetches(&words[i..]))
}

fn fetches_deep(s: &Scanned) -> bool {
    fetches(&s.cmd.words) || s.nested.iter().any(fetches_deep)
}

/// After `cd X`, later relative paths may be relative to X or, if the `cd` failed, to where the
/// shell was before.
fn change_dir(words: &[Word], cwds: &mut Vec<Option<PathBuf>>, ctx: &GuardContext) {
    let Some(name) = words.first().map(|w| base(&w.text)) else {
        return;
    };
    match name {
        "cd" | "pushd" => {
            let target = words[1..].iter().find(|w| !w.text.starts_with('-'));
            let added: Vec<Option<PathBuf>> = match target {
                None if words.len() == 1 => vec![Some(ctx.home.to_path_buf())],
                None => vec![None],
                Some(t) => cwds
                    .iter()
                    .map(|c| paths::resolve(t, c.as_deref(), ctx.home))
                    .collect(),
            };
            for a in added {
                if !cwds.contains(&a) {
                    cwds.push(a);
                }
            }
        }
        "popd" if !cwds.contains(&None) => cwds.push(None),
        _ => {}
    }
}

/// The danger in one simple command's words, if any.
fn danger(words: &[Word], cwds: &[Option<PathBuf>], ctx: &GuardContext) -> Option<String> {
    let name = base(&words.first()?.text);
    let args = &words[1..];
    if PRIVILEGE.contains(&name) {
        return Some(format!("{name} (runs with more rights)"));
    }
    if let Some(p) = args.iter().find(|a| PRIVILEGE.contains(&base(&a.text)))
        && inner_start(words).is_some()
    {
        return Some(format!("{} (runs with more rights)", base(&p.text)));
    }
    if let Some(i) = inner_start(words)
        && let Some(why) = danger(&words[i..], cwds, ctx)
    {
        return Some(why);
    }
    if name.starts_with("mkfs") || DESTROYERS.contains(&name) {
        return Some(format!("{name} (destroys data beyond recovery)"));
    }
    match name {
        "rm" if rm_recursive_forced(args) => {
            return Some("a recursive forced delete (rm -rf)".into());
        }
        "find" => return find_danger(words, cwds, ctx),
        "git" => {
            return git_push_danger(args).or_else(|| super::worktrees::danger(args, cwds, ctx));
        }
        "crontab" if !(args.len() == 1 && args[0].text == "-l") => {
            return Some("crontab (installs commands that run later)".into());
        }
        "chmod" | "chown" | "chgrp" if recursive(args) => {
            for w in positionals(args, &[]).into_iter().skip(1) {
                for c in cwds {
                    let p = paths::resolve(w, c.as_deref(), ctx.home);
                    if p.as_deref()
                        .is_none_or(|p| p == Path::new("/") || ctx.home.starts_with(p))
                    {
                        return Some(format!("a recursive {name} of the home directory or /"));
                    }
                }
            }
        }
        "dd" => {
            for a in args {
                if let Some(of) = a.text.strip_prefix("of=")
                    && of.starts_with("/dev/")
                    && !matches!(of, "/dev/null" | "/dev/stdout" | "/dev/stderr")
                {
                    return Some("dd onto a device".into());
                }
            }
        }
        _ => {}
    }
    if matches!(name, "rm" | "rmdir" | "mv" | "shred" | "unlink") {
        for w in positionals(args, &[]) {
            for c in cwds {
                if let Some(p) = paths::resolve(w, c.as_deref(), ctx.home)
                    && ctx.session_dir.starts_with(&p)
                {
                    return Some(format!("{name} of the session's directory or above it"));
                }
            }
        }
    }
    if name == "ln" && options(args).0.contains('s') {
        // A link inside to a place outside turns later writes "inside" into writes outside.
        if let Some(target) = positionals(args, &["-t", "-S", "--suffix"]).first()
            && let Some(why) = paths::check_word(target, cwds, ctx)
        {
            return Some(format!("a symbolic link to {why}"));
        }
    }
    for w in written(name, args) {
        if let Some(why) = paths::check_word(&w, cwds, ctx) {
            return Some(format!("{name} writes {why}"));
        }
    }
    None
}

/// Arguments that are not options, skipping the values of the options in `valued`; everything
/// after `--` counts.
fn positionals<'a>(args: &'a [Word], valued: &[&str]) -> Vec<&'a Word> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut opts = true;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if opts && t == "--" {
            opts = false;
        } else if opts && t.starts_with('-') && t.len() > 1 {
            if valued.contains(&t) {
                i += 1;
            }
        } else {
            out.push(a);
        }
        i += 1;
    }
    out
}

/// Short option letters and long option names given before `--` (options may follow operands).
fn options(args: &[Word]) -> (String, Vec<&str>) {
    let mut short = String::new();
    let mut long = Vec::new();
    for a in args {
        let t = a.text.as_str();
        if t == "--" {
            break;
        }
        if let Some(l) = t.strip_prefix("--") {
            long.push(l.split('=').next().unwrap_or(l));
        } else if let Some(s) = t.strip_prefix('-') {
            short.push_str(s);
        }
    }
    (short, long)
}

/// `--rec` is `--recursive` to getopt: a long option may be shortened while unambiguous.
fn long_is(given: &str, full: &str) -> bool {
    !given.is_empty() && full.starts_with(given)
}

fn rm_recursive_forced(args: &[Word]) -> bool {
    let (short, long) = options(args);
    let r = short.contains(['r', 'R']) || long.iter().any(|l| long_is(l, "recursive"));
    let f = short.contains('f') || long.iter().any(|l| long_is(l, "force"));
    r && f
}

fn recursive(args: &[Word]) -> bool {
    let (short, long) = options(args);
    short.contains('R') || long.iter().any(|l| long_is(l, "recursive"))
}

fn find_danger(words: &[Word], cwds: &[Option<PathBuf>], ctx: &GuardContext) -> Option<String> {
    if words.iter().any(|w| w.text == "-delete") {
        return Some("find -delete".into());
    }
    let i = find_exec(words)?;
    let end = words[i..]
        .iter()
        .position(|w| w.text == ";" || w.text == "+")
        .map_or(words.len(), |e| i + e);
    let inner = &words[i..end];
    let inner_name = base(&inner.first()?.text);
    if matches!(inner_name, "rm" | "rmdir" | "unlink" | "shred") {
        return Some(format!("find -exec {inner_name}"));
    }
    if is_writer(inner_name) {
        // The files it writes are what find finds: under find's starting points.
        let starts = words[1..]
            .iter()
            .take_while(|w| !w.text.starts_with('-') && w.text != "(" && w.text != "!");
        for s in starts {
            if let Some(why) = paths::check_word(s, cwds, ctx) {
                return Some(format!("find -exec {inner_name} under {why}"));
            }
        }
    }
    danger(inner, cwds, ctx)
}

fn git_push_danger(args: &[Word]) -> Option<String> {
    // Global options before the subcommand; those with a separate value skip it.
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if matches!(t, "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace") {
            i += 2;
        } else if t.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    if args.get(i).is_none_or(|a| a.text != "push") {
        return None;
    }
    let rest = &args[i + 1..];
    let mut opts = true;
    for a in rest {
        let t = a.text.as_str();
        if opts && t == "--" {
            opts = false;
            continue;
        }
        if opts && let Some(l) = t.strip_prefix("--") {
            let l = l.split('=').next().unwrap_or(l);
            let bad = [
                "force",
                "force-with-lease",
                "force-if-includes",
                "mirror",
                "delete",
                "prune",
            ];
            if l.len() >= 2 && bad.iter().any(|b| long_is(l, b)) {
                return Some(format!(
                    "git push --{l} (rewrites or deletes remote history)"
                ));
            }
            continue;
        }
        if opts && let Some(s) = t.strip_prefix('-') {
            // `-o` takes the rest of the word as its value.
            let flags = s.split('o').next().unwrap_or(s);
            if flags.contains(['f', 'd']) {
                return Some(format!("git push {t} (rewrites or deletes remote history)"));
            }
            continue;
        }
        if t.starts_with('+') || t.starts_with(':') {
            return Some(format!("git push {t} (rewrites or deletes remote history)"));
        }
    }
    None
}

/// The arguments of `name` that it writes to.
fn written(name: &str, args: &[Word]) -> Vec<Word> {
    let owned = |v: Vec<&Word>| v.into_iter().cloned().collect::<Vec<Word>>();
    match name {
        "tee" | "touch" | "mkdir" | "rm" | "rmdir" | "unlink" | "shred" | "mv" => {
            let mut out = owned(positionals(
                args,
                &["-m", "--mode", "-t", "--target-directory", "-S", "--suffix"],
            ));
            out.extend(target_dir(args));
            out
        }
        "truncate" => owned(positionals(args, &["-s", "--size", "-r", "--reference"])),
        "cp" | "ln" | "install" | "rsync" => {
            let valued = [
                "-m", "-o", "-g", "-t", "-S", "--mode", "--owner", "--group", "-e",
            ];
            let pos = positionals(args, &valued);
            let mut out: Vec<Word> = target_dir(args).into_iter().collect();
            if name == "install" && args.iter().any(|a| a.text == "-d") {
                out.extend(owned(pos));
            } else if out.is_empty() {
                out.extend(pos.last().map(|w| (*w).clone()));
            }
            out
        }
        "chmod" | "chown" | "chgrp" => {
            let pos = positionals(args, &[]);
            let by_ref = args.iter().any(|a| a.text.starts_with("--reference"));
            owned(pos.into_iter().skip(usize::from(!by_ref)).collect())
        }
        "sed"
            if args
                .iter()
                .any(|a| a.text.starts_with("-i") || a.text.starts_with("--in-place")) =>
        {
            let valued = ["-e", "-f", "--expression", "--file", "-l"];
            let pos = positionals(args, &valued);
            let has_script = args.iter().any(|a| valued.contains(&a.text.as_str()));
            owned(pos.into_iter().skip(usize::from(!has_script)).collect())
        }
        "dd" => args.iter().filter_map(|a| strip(a, "of=")).collect(),
        "curl" => value_of(args, &["-o", "--output"]),
        "wget" => value_of(args, &["-O", "--output-document"]),
        "tar" => value_of(args, &["-C", "--directory"]),
        "unzip" => value_of(args, &["-d"]),
        _ => Vec::new(),
    }
}

/// `-t DIR`, `-tDIR` or `--target-directory=DIR` of cp, mv, ln and install.
fn target_dir(args: &[Word]) -> Option<Word> {
    if let Some(i) = args
        .iter()
        .position(|a| a.text == "-t" || a.text == "--target-directory")
    {
        return args.get(i + 1).cloned();
    }
    args.iter().find_map(|a| {
        strip(a, "--target-directory=").or_else(|| {
            (a.text.len() > 2 && a.text.starts_with("-t"))
                .then(|| strip(a, "-t"))
                .flatten()
        })
    })
}

/// The word without a literal prefix such as `of=`; what follows keeps its expansions.
fn strip(w: &Word, prefix: &str) -> Option<Word> {
    let text = w.text.strip_prefix(prefix)?.to_string();
    let rest = w.rest.strip_prefix(prefix).unwrap_or(&w.rest).to_string();
    let base = if w.base == Base::Literal {
        Base::Literal
    } else {
        // `of=$HOME/x`: the expansion came after literal text, so it was not kept as a base.
        Base::Unknown
    };
    Some(Word {
        text,
        base,
        rest,
        glob: w.glob,
        plain: false,
    })
}

/// The values of options that name a file written (`-o FILE`, `--output=FILE`); `-` is output.
fn value_of(args: &[Word], opts: &[&str]) -> Vec<Word> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if opts.contains(&a.text.as_str()) {
            out.extend(args.get(i + 1).cloned());
        }
        for o in opts {
            if o.starts_with("--") {
                out.extend(strip(a, &format!("{o}=")));
            } else if a.text.len() > o.len() {
                out.extend(strip(a, o));
            }
        }
    }
    out.retain(|w| w.text != "-");
    out
}
