//! What a command name means: shells, interpreters, wrappers that run another command, and the
//! commands whose effect cannot be known from their words (so they are never "understood").

use super::parse::Word;

/// Shells: `-c` or standard input means code that is not in the command's words.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "yash",
];

/// Interpreters and the options that take code on the command line.
const INTERPRETERS: &[(&str, &str)] = &[
    ("python", "c"),
    ("pypy", "c"),
    ("perl", "eE"),
    ("ruby", "e"),
    ("node", "ep"),
    ("nodejs", "ep"),
    ("deno", ""),
    ("bun", "e"),
    ("php", "rBRFE"),
    ("lua", "e"),
    ("luajit", "e"),
    ("osascript", "e"),
    ("Rscript", "e"),
    ("R", "e"),
    ("tclsh", ""),
    ("wish", ""),
    ("jshell", ""),
    ("irb", ""),
    ("guile", "c"),
];

/// Shell builtins and commands that run text as code or change what later commands mean.
const REFUSED: &[(&str, &str)] = &[
    ("eval", "eval runs text as code"),
    ("source", "source runs a file's text as code"),
    (".", ". runs a file's text as code"),
    ("exec", "exec replaces the shell"),
    ("command", "command hides which command runs"),
    ("builtin", "builtin hides which command runs"),
    ("alias", "alias changes what later words mean"),
    ("trap", "trap runs text as code"),
    ("let", "let evaluates arithmetic that can run code"),
    ("declare", "declare can evaluate code"),
    ("typeset", "typeset can evaluate code"),
    ("local", "local can evaluate code"),
    ("export", "export changes what later commands see"),
    ("readonly", "readonly can evaluate code"),
    ("fc", "fc runs commands from history"),
    ("enable", "enable changes the shell's builtins"),
    ("mapfile", "mapfile can run a callback"),
    ("readarray", "readarray can run a callback"),
    ("hash", "hash changes which program a name runs"),
    ("bind", "bind can run code"),
    ("watch", "watch runs its command through a shell"),
    ("parallel", "parallel runs its command through a shell"),
    ("script", "script runs a shell"),
    ("ssh", "ssh runs commands elsewhere"),
    ("busybox", "busybox runs the program named in its arguments"),
];

/// Commands that fetch from the network.
const DOWNLOADS: &[&str] = &["curl", "wget", "fetch", "aria2c", "http", "https", "xh"];

/// Commands that run another program with more rights.
/// Commands whose file arguments are written (created, changed or removed).
const WRITERS: &[&str] = &[
    "tee", "cp", "mv", "install", "ln", "touch", "mkdir", "rm", "rmdir", "chmod", "chown", "chgrp",
    "truncate", "sed", "dd", "shred", "unlink", "rsync",
];

/// Whether `name` writes the files it is given.
pub(crate) fn is_writer(name: &str) -> bool {
    WRITERS.contains(&name)
}

pub(crate) const PRIVILEGE: &[&str] = &["sudo", "doas", "su", "pkexec", "run0", "sudoedit"];

/// Wrappers that run the command in their arguments: (name, options that take a value,
/// positional arguments before the command).
const WRAPPERS: &[(&str, &[&str], usize)] = &[
    (
        "env",
        &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
        0,
    ),
    ("nice", &["-n", "--adjustment"], 0),
    ("nohup", &[], 0),
    ("setsid", &[], 0),
    ("time", &["-f", "--format", "-o", "--output"], 0),
    (
        "stdbuf",
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        0,
    ),
    ("timeout", &["-s", "--signal", "-k", "--kill-after"], 1),
    (
        "ionice",
        &["-c", "--class", "-n", "--classdata", "-p", "-P", "-u"],
        0,
    ),
    ("taskset", &[], 1),
    (
        "xargs",
        &[
            "-I",
            "-i",
            "-n",
            "--max-args",
            "-L",
            "-l",
            "--max-lines",
            "-P",
            "--max-procs",
            "-d",
            "--delimiter",
            "-E",
            "-e",
            "--eof",
            "-s",
            "--max-chars",
            "-a",
            "--arg-file",
        ],
        0,
    ),
    (
        "flock",
        &["-w", "--timeout", "-E", "--conflict-exit-code"],
        1,
    ),
    (
        "sudo",
        &[
            "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group",
        ],
        0,
    ),
    ("doas", &["-u", "-C"], 0),
    ("unbuffer", &[], 0),
    // Refused as not understood, but looked through for dangers.
    ("command", &[], 0),
    ("builtin", &[], 0),
    ("exec", &["-a"], 0),
    ("chronic", &[], 0),
];

/// The command name without its directory.
pub(crate) fn base(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

pub(crate) fn is_shell(name: &str) -> bool {
    SHELLS.contains(&base(name))
}

/// The code options of an interpreter (`python3.12` counts as `python`).
fn interpreter(name: &str) -> Option<&'static str> {
    let n = base(name);
    let stem = n.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS
        .iter()
        .find(|(i, _)| *i == n || *i == stem)
        .map(|(_, opts)| *opts)
}

pub(crate) fn is_interpreter(name: &str) -> bool {
    interpreter(name).is_some()
}

pub(crate) fn is_download(name: &str) -> bool {
    DOWNLOADS.contains(&base(name))
}

/// Whether a command runs code it reads, once wrappers are looked through (`env sh`, `sudo
/// bash`, `xargs python3`): what a download piped into it would run.
pub(crate) fn runs_code(words: &[Word]) -> bool {
    let Some(name) = words.first().map(|w| base(&w.text)) else {
        return false;
    };
    if is_shell(name) || is_interpreter(name) || matches!(name, "eval" | "source" | ".") {
        return true;
    }
    if wrapper(name).is_some() {
        // Any later word, not only the one the option parsing finds: a wrong guess about an
        // option's value must not hide a shell.
        return words[1..]
            .iter()
            .any(|w| is_shell(&w.text) || is_interpreter(&w.text));
    }
    false
}

fn wrapper(name: &str) -> Option<&'static (&'static str, &'static [&'static str], usize)> {
    WRAPPERS.iter().find(|(n, _, _)| *n == name)
}

/// Where the wrapped command starts in `words`, for a wrapper (`env X=1 rm` → 2); `None` for
/// anything else or a wrapper without a command.
pub(crate) fn inner_start(words: &[Word]) -> Option<usize> {
    let name = base(&words.first()?.text);
    let &(_, valued, positional) = wrapper(name)?;
    let mut positional = positional;
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if t.starts_with('-') && t.len() > 1 {
            let takes_value = if t.starts_with("--") {
                !t.contains('=') && valued.contains(&t)
            } else {
                // `-n5` carries its value; `-n 5` does not.
                valued.contains(&t.get(..2).unwrap_or(t)) && t.len() == 2
            };
            i += if takes_value { 2 } else { 1 };
            continue;
        }
        if name == "env" && t.contains('=') {
            i += 1;
            continue;
        }
        if positional > 0 {
            positional -= 1;
            i += 1;
            continue;
        }
        break;
    }
    (i < words.len()).then_some(i)
}

/// Why the effect of this command cannot be known from its words, if so.
pub(crate) fn refusal(words: &[Word]) -> Option<String> {
    let first = words.first()?;
    if !first.plain {
        return Some(format!(
            "the command name {:?} is not a plain word",
            first.text
        ));
    }
    if first.glob {
        return Some(format!("the command name {:?} is a wildcard", first.text));
    }
    let name = base(&first.text);
    if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
        return Some((*why).to_string());
    }
    let args = &words[1..];
    if is_shell(name) {
        return shell_refusal(name, args);
    }
    if let Some(code_opts) = interpreter(name) {
        return interpreter_refusal(name, code_opts, args);
    }
    if matches!(name, "awk" | "gawk" | "mawk" | "nawk") {
        return awk_refusal(args);
    }
    if name == "git"
        && args
            .iter()
            .any(|a| a.text == "-c" || a.text.starts_with("--config-env"))
    {
        return Some("git -c can make git run commands".into());
    }
    if name == "sed" {
        return sed_refusal(args);
    }
    if name == "find" {
        return find_exec(words).and_then(|i| refusal(&words[i..]));
    }
    if name == "env"
        && args
            .iter()
            .any(|a| a.text == "-S" || a.text.starts_with("--split-string"))
    {
        return Some("env -S splits text into a command".into());
    }
    if wrapper(name).is_some() {
        if args
            .iter()
            .any(|a| is_shell(&a.text) || is_interpreter(&a.text))
        {
            return Some(format!("{name} runs a shell or an interpreter"));
        }
        if let Some(i) = inner_start(words) {
            if name == "xargs" && is_writer(base(&words[i].text)) {
                return Some("xargs gives a writing command paths known only at run time".into());
            }
            return refusal(&words[i..]);
        }
    }
    None
}

fn shell_refusal(name: &str, args: &[Word]) -> Option<String> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "--" || t == "-" {
            break;
        }
        if t.starts_with("--") {
            if t.starts_with("--command") {
                return Some(format!("{name} -c runs text as code"));
            }
            i += if matches!(t, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            if t.contains('c') {
                return Some(format!("{name} -c runs text as code"));
            }
            if t.contains('s') || t.contains('i') {
                return Some(format!("{name} reads code from its input"));
            }
            i += if t.ends_with('o') || t.ends_with('O') {
                2
            } else {
                1
            };
            continue;
        }
        // A script file: what it does is the file's business, as for any program.
        return reads_input(t).then(|| format!("{name} reads code from its input"));
    }
    Some(format!("{name} reads code from its input"))
}

fn interpreter_refusal(name: &str, code_opts: &str, args: &[Word]) -> Option<String> {
    for a in args {
        let t = a.text.as_str();
        if t == "-" {
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            if matches!(long.split('=').next(), Some("eval" | "print" | "command")) {
                return Some(format!("{name} runs code given on the command line"));
            }
            continue;
        }
        if let Some(short) = t.strip_prefix('-') {
            if short.chars().any(|c| code_opts.contains(c)) {
                return Some(format!("{name} runs code given on the command line"));
            }
            if short.starts_with('m') {
                // `python3 -m pytest`: a module, like a script file.
                return None;
            }
            continue;
        }
        return reads_input(t).then(|| format!("{name} reads code from its input"));
    }
    Some(format!("{name} reads code from its input"))
}

/// A script "file" that is the command's own input.
fn reads_input(path: &str) -> bool {
    matches!(path, "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

/// GNU sed runs commands (`e`, the `e` flag of `s`) and writes files (`w`, `W`, the `w` flag)
/// from its script; a script from a file (`-f`) cannot be read here.
fn sed_refusal(args: &[Word]) -> Option<String> {
    let mut scripts = Vec::new();
    let mut i = 0;
    let mut explicit = false;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "-f" || t.starts_with("--file") {
            return Some("a sed script from a file".into());
        }
        if t == "-e" || t == "--expression" {
            explicit = true;
            scripts.extend(args.get(i + 1).map(|w| w.text.as_str()));
            i += 2;
            continue;
        }
        if let Some(e) = t.strip_prefix("--expression=") {
            explicit = true;
            scripts.push(e);
        } else if !t.starts_with('-') && !explicit && scripts.is_empty() {
            scripts.push(t);
        }
        i += 1;
    }
    scripts
        .iter()
        .any(|s| sed_script_acts(s))
        .then(|| "a sed script that runs commands or writes files".to_string())
}

fn sed_script_acts(script: &str) -> bool {
    for part in script.split([';', '\n', '{', '}']) {
        let mut cmd = part.trim_start_matches(|c: char| {
            c.is_ascii_digit() || matches!(c, ',' | '$' | '!' | '~' | '+' | ' ' | '\t')
        });
        // A /regex/ address.
        while let Some(rest) = cmd.strip_prefix('/') {
            cmd = rest.split_once('/').map_or("", |(_, r)| r);
            cmd = cmd.trim_start_matches(|c: char| {
                matches!(c, ',' | '!' | ' ' | '$') || c.is_ascii_digit()
            });
        }
        let mut chars = cmd.chars();
        match chars.next() {
            Some('e' | 'w' | 'W') => return true,
            Some('s') => {
                let Some(d) = chars.next() else { continue };
                let body: String = chars.collect();
                // The flags follow the second unescaped delimiter of the body.
                let mut seen = 0;
                let mut escaped = false;
                let mut flags = String::new();
                for c in body.chars() {
                    if seen == 2 {
                        flags.push(c);
                    } else if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == d {
                        seen += 1;
                    }
                }
                if flags.contains(['e', 'w', 'W']) {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// awk programs may run commands (`system`, `|`) or write files (`>`).
fn awk_refusal(args: &[Word]) -> Option<String> {
    let program = args.iter().find(|a| !a.text.starts_with('-'))?;
    if program.text.contains("system") || program.text.contains(['|', '>']) {
        return Some("an awk program that runs commands or writes files".into());
    }
    None
}

/// Where the command of `find ... -exec CMD ... ;` starts, if there is one.
pub(crate) fn find_exec(words: &[Word]) -> Option<usize> {
    let i = words
        .iter()
        .position(|w| matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))?;
    (i + 1 < words.len()).then_some(i + 1)
}
