//! The standing structure rules (issue 21), checked over the source of every shipped crate
//! (daemon, gateway, ctl, proto, bench; this tests/ crate is exempt):
//!
//! - **No file over 800 lines of non-test code**: non-blank, non-comment lines outside
//!   `#[cfg(test)]` items (a file declared by `#[cfg(test)] mod x;` is all test code).
//! - **No import circles**: within a crate, file A has an edge to file B when A names
//!   `crate::…` or `super::…` (outside `#[cfg(test)]` items) and the longest module path
//!   prefix of that name that is a file of the crate is B. No cycle between files, and none
//!   between top-level units (the top-level folder or file of A → that of B).
//!
//! The scanner is a small tokenizer, not a Rust parser: it knows comments (nested), string
//! literals (raw, byte, C), char literals and lifetimes well enough that braces inside them do
//! not confuse the matching of `#[cfg(test)]` items. `#[path]` attributes are not supported
//! (none are used).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The most lines of non-test code one file may have.
const MAX_CODE_LINES: usize = 800;

#[test]
fn daemon_follows_the_structure_rules() {
    assert_follows_rules(&["daemon"]);
}

#[test]
fn gateway_follows_the_structure_rules() {
    assert_follows_rules(&["gateway"]);
}

#[test]
fn ctl_follows_the_structure_rules() {
    assert_follows_rules(&["ctl"]);
}

#[test]
fn proto_and_bench_follow_the_structure_rules() {
    assert_follows_rules(&["proto", "bench"]);
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn assert_follows_rules(packages: &[&str]) {
    let mut report = String::new();
    for package in packages {
        let src = workspace_root().join(package).join("src");
        let files = read_tree(&src);
        assert!(!files.is_empty(), "no Rust files under {}", src.display());
        let problems = check_package(&files);
        if !problems.is_empty() {
            let _ = writeln!(
                report,
                "{package}/src breaks the structure rules:\n{problems}"
            );
        }
    }
    assert!(report.is_empty(), "\n{report}");
}

/// Every `.rs` file under `src`, by path relative to it (with `/` separators).
fn read_tree(src: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<String, String>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).expect("under src");
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                out.insert(rel, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// Checks one package's source files (relative path → text); returns the problems found, one
/// per line, or an empty string.
fn check_package(files: &BTreeMap<String, String>) -> String {
    let scanned: BTreeMap<&str, Scanned> = files
        .iter()
        .map(|(path, text)| (path.as_str(), scan(text)))
        .collect();
    let test_only = test_only_files(&scanned);
    let mut out = String::new();

    let mut too_long: Vec<(&str, usize)> = scanned
        .iter()
        .filter(|(path, _)| !test_only.contains(**path))
        .map(|(path, s)| (*path, s.code_lines))
        .filter(|(_, n)| *n > MAX_CODE_LINES)
        .collect();
    too_long.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if !too_long.is_empty() {
        let _ = writeln!(
            out,
            "  files over {MAX_CODE_LINES} lines of non-test code (split them by concern):"
        );
        for (path, n) in &too_long {
            let _ = writeln!(out, "    {path}: {n} lines");
        }
    }

    let graph = file_graph(&scanned, &test_only);
    let file_edges: BTreeMap<&str, BTreeSet<&str>> = graph
        .iter()
        .map(|(from, tos)| (from.as_str(), tos.keys().map(String::as_str).collect()))
        .collect();
    let cycles = find_cycles(&file_edges);
    if !cycles.is_empty() {
        let _ = writeln!(out, "  import circles between files:");
        for cycle in &cycles {
            let _ = writeln!(out, "    {}", cycle.join(" → "));
            for pair in cycle.windows(2) {
                let (line, name) = &graph[pair[0]][pair[1]];
                let _ = writeln!(out, "      {}:{line} names {name}", pair[0]);
            }
        }
    }

    let mut unit_edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut unit_why: BTreeMap<(String, String), String> = BTreeMap::new();
    for (from, tos) in &graph {
        for (to, (line, name)) in tos {
            let (a, b) = (top_unit(from, files), top_unit(to, files));
            if a != b {
                unit_edges.entry(a.clone()).or_default().insert(b.clone());
                unit_why
                    .entry((a, b))
                    .or_insert_with(|| format!("{from}:{line} names {name}"));
            }
        }
    }
    let unit_edges: BTreeMap<&str, BTreeSet<&str>> = unit_edges
        .iter()
        .map(|(a, bs)| (a.as_str(), bs.iter().map(String::as_str).collect()))
        .collect();
    let cycles = find_cycles(&unit_edges);
    if !cycles.is_empty() {
        let _ = writeln!(out, "  import circles between top-level folders/files:");
        for cycle in &cycles {
            let _ = writeln!(out, "    {}", cycle.join(" → "));
            for pair in cycle.windows(2) {
                let why = &unit_why[&(pair[0].to_string(), pair[1].to_string())];
                let _ = writeln!(out, "      {} → {}: e.g. {why}", pair[0], pair[1]);
            }
        }
    }
    out
}

/// The top-level unit a file belongs to: its top-level folder (`platforms/`) or, for a file
/// directly in src, the file (`config.rs`); a file and the folder of its submodules are one unit.
fn top_unit(path: &str, files: &BTreeMap<String, String>) -> String {
    match path.split_once('/') {
        Some((dir, _)) => format!("{dir}/"),
        None => {
            let stem = path.trim_end_matches(".rs");
            let has_folder = files.keys().any(|p| p.starts_with(&format!("{stem}/")));
            if has_folder {
                format!("{stem}/")
            } else {
                path.to_string()
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
    /// A string, char or number literal (contents irrelevant here).
    Lit,
    Lifetime,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// First and last line (1-based) the token spans.
    line: usize,
    end_line: usize,
}

/// Splits Rust source into tokens, dropping whitespace and comments.
fn tokenize(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some(len) = raw_string_prefix(&chars, i) {
            // r"…", r#"…"#, br#"…"#, cr"…": no escapes; ends at `"` plus as many `#`.
            let start = line;
            let hashes = chars[i..i + len].iter().filter(|&&c| c == '#').count();
            i += len + 1;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    i += 1 + hashes;
                    break;
                }
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            out.push(Token {
                tok: Tok::Lit,
                line: start,
                end_line: line,
            });
        } else if c == '"' || ((c == 'b' || c == 'c') && at(i + 1) == '"') {
            let start = line;
            i += if c == '"' { 1 } else { 2 };
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(Token {
                tok: Tok::Lit,
                line: start,
                end_line: line,
            });
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            let q = if c == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                // An escaped char literal: '\n', '\'', '\u{7f}'.
                let mut j = q + 3;
                while j < chars.len() && chars[j] != '\'' && chars[j] != '\n' {
                    j += 1;
                }
                i = j + 1;
                out.push(Token {
                    tok: Tok::Lit,
                    line,
                    end_line: line,
                });
            } else if at(q + 2) == '\'' {
                i = q + 3;
                out.push(Token {
                    tok: Tok::Lit,
                    line,
                    end_line: line,
                });
            } else {
                // A lifetime or label: 'a, 'static, 'outer.
                i = q + 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Lifetime,
                    line,
                    end_line: line,
                });
            }
        } else if c.is_alphabetic() || c == '_' {
            let s = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[s..i].iter().collect();
            let word = word.strip_prefix("r#").unwrap_or(&word).to_string();
            out.push(Token {
                tok: Tok::Ident(word),
                line,
                end_line: line,
            });
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            // 1.5 but not 1..2 nor 1.method()
            if at(i) == '.' && at(i + 1).is_ascii_digit() {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Lit,
                line,
                end_line: line,
            });
        } else {
            out.push(Token {
                tok: Tok::Punct(c),
                line,
                end_line: line,
            });
            i += 1;
        }
    }
    out
}

/// The length of a raw string's prefix up to (not including) its opening quote, when one
/// starts at `i`: `r`, `r#`, `br##`, `cr`.
fn raw_string_prefix(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(j - i)
}

// ---------------------------------------------------------------------------------------------
// One file

/// What the rules need to know about one file.
#[derive(Debug, Default)]
struct Scanned {
    /// Non-blank, non-comment lines outside `#[cfg(test)]` items.
    code_lines: usize,
    /// `mod x;` declarations outside test items.
    mods: Vec<String>,
    /// `mod x;` declarations inside test items (their files are test code).
    test_mods: Vec<String>,
    /// Paths naming `crate::…` or `super::…` outside test items: (line, inline module path
    /// the name occurs in, the path's segments starting with `crate` or `super`).
    names: Vec<(usize, Vec<String>, Vec<String>)>,
}

fn scan(src: &str) -> Scanned {
    let toks = tokenize(src);
    let in_test = test_mask(&toks);
    let mut code = BTreeSet::new();
    for (t, test) in toks.iter().zip(&in_test) {
        if !test {
            code.extend(t.line..=t.end_line);
        }
    }
    let mut s = Scanned {
        code_lines: code.len(),
        ..Scanned::default()
    };

    let ident = |k: usize| match toks.get(k).map(|t| &t.tok) {
        Some(Tok::Ident(w)) => Some(w.as_str()),
        _ => None,
    };
    let punct = |k: usize, c: char| toks.get(k).is_some_and(|t| t.tok == Tok::Punct(c));
    // Inline modules (`mod x { … }`) we are inside, with the brace depth they opened at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut k = 0;
    while k < toks.len() {
        if punct(k, '{') {
            depth += 1;
        } else if punct(k, '}') {
            depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
        } else if ident(k) == Some("mod") && k + 2 < toks.len() {
            if let Some(name) = ident(k + 1) {
                if punct(k + 2, ';') {
                    if in_test[k] {
                        s.test_mods.push(name.to_string());
                    } else if inline.is_empty() {
                        s.mods.push(name.to_string());
                    }
                } else if punct(k + 2, '{') {
                    inline.push((name.to_string(), depth));
                    depth += 1;
                    k += 3;
                    continue;
                }
            }
        } else if !in_test[k]
            && matches!(ident(k), Some("crate" | "super"))
            && punct(k + 1, ':')
            && punct(k + 2, ':')
            && !(k > 0 && punct(k - 1, '$'))
            && !(k > 1 && punct(k - 1, ':') && punct(k - 2, ':'))
        {
            let mods: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
            let mut paths = Vec::new();
            let end = use_tree(&toks, k, Vec::new(), &mut paths);
            for p in paths {
                s.names.push((toks[k].line, mods.clone(), p));
            }
            k = end.max(k + 1);
            continue;
        }
        k += 1;
    }
    s
}

/// Reads a path starting at token `k` (`a::b::c`, `a::{b, c::d}`, `a::b as c`, `a::*`),
/// pushing each full path (prefixed by `prefix`) into `out`; returns the index after it.
fn use_tree(
    toks: &[Token],
    mut k: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let is = |k: usize, c: char| toks.get(k).is_some_and(|t| t.tok == Tok::Punct(c));
    loop {
        match toks.get(k).map(|t| &t.tok) {
            Some(Tok::Ident(w)) => {
                prefix.push(w.clone());
                k += 1;
            }
            Some(Tok::Punct('{')) => {
                k += 1;
                while k < toks.len() && !is(k, '}') {
                    k = use_tree(toks, k, prefix.clone(), out);
                    if is(k, ',') {
                        k += 1;
                    } else if !is(k, '}') {
                        k += 1; // something unexpected: move on
                    }
                }
                return k + 1;
            }
            _ => {
                // `*`, or nothing: the path ends here.
                if is(k, '*') {
                    k += 1;
                }
                out.push(prefix);
                return k;
            }
        }
        if is(k, ':') && is(k + 1, ':') {
            k += 2;
        } else {
            if let Some(Tok::Ident(w)) = toks.get(k).map(|t| &t.tok)
                && w == "as"
            {
                k += 2; // `as name`
            }
            out.push(prefix);
            return k;
        }
    }
}

/// Marks the tokens belonging to `#[cfg(test)]` items (the attribute included).
fn test_mask(toks: &[Token]) -> Vec<bool> {
    let mut mask = vec![false; toks.len()];
    let p = |k: usize, c: char| toks.get(k).is_some_and(|t| t.tok == Tok::Punct(c));
    let id = |k: usize, w: &str| toks.get(k).is_some_and(|t| t.tok == Tok::Ident(w.into()));
    let mut k = 0;
    while k < toks.len() {
        let is_cfg_test = p(k, '#')
            && p(k + 1, '[')
            && id(k + 2, "cfg")
            && p(k + 3, '(')
            && id(k + 4, "test")
            && p(k + 5, ')')
            && p(k + 6, ']');
        if !is_cfg_test {
            k += 1;
            continue;
        }
        let end = item_end(toks, k + 7);
        for m in &mut mask[k..end] {
            *m = true;
        }
        k = end;
    }
    mask
}

/// The index just past the item (or field, arm, statement) starting at `k`.
fn item_end(toks: &[Token], mut k: usize) -> usize {
    let p = |k: usize, c: char| toks.get(k).is_some_and(|t| t.tok == Tok::Punct(c));
    // Further attributes.
    while p(k, '#') && p(k + 1, '[') {
        k = skip_group(toks, k + 1);
    }
    // An item ends at its `;` or its body; a field, variant or argument also ends at `,`.
    let mut j = k;
    let mut is_item = false;
    while let Some(Tok::Ident(w)) = toks.get(j).map(|t| &t.tok) {
        if matches!(
            w.as_str(),
            "fn" | "mod"
                | "impl"
                | "struct"
                | "enum"
                | "trait"
                | "use"
                | "const"
                | "static"
                | "type"
                | "macro_rules"
                | "extern"
                | "let"
                | "union"
        ) {
            is_item = true;
            break;
        }
        if !matches!(w.as_str(), "pub" | "async" | "unsafe" | "default") {
            break;
        }
        j += 1;
        if p(j, '(') {
            j = skip_group(toks, j);
        }
    }
    let mut depth = 0usize;
    while k < toks.len() {
        match &toks[k].tok {
            Tok::Punct('(' | '[') => depth += 1,
            Tok::Punct(')' | ']') => depth = depth.saturating_sub(1),
            Tok::Punct('{') if depth == 0 => {
                let end = skip_group(toks, k);
                return if p(end, ';') { end + 1 } else { end };
            }
            Tok::Punct('}') if depth == 0 => return k,
            Tok::Punct(';') if depth == 0 => return k + 1,
            Tok::Punct(',') if depth == 0 && !is_item => return k + 1,
            _ => {}
        }
        k += 1;
    }
    k
}

/// The index just past the bracketed group opening at `k` (`(`, `[` or `{`).
fn skip_group(toks: &[Token], mut k: usize) -> usize {
    let mut depth = 0usize;
    while k < toks.len() {
        match toks[k].tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
        k += 1;
    }
    k
}

// ---------------------------------------------------------------------------------------------
// The crate's files

/// The module path a file stands for (`a/b.rs` and `a/b/mod.rs` → `[a, b]`; roots → `[]`).
fn module_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    let is_root = parts.is_empty() && (stem == "lib" || stem == "main");
    let in_bin = parts.first().is_some_and(|p| p == "bin");
    if is_root || (in_bin && parts.len() == 1) {
        return Vec::new();
    }
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The crate roots: lib.rs, main.rs, bin/*.rs.
fn is_root(path: &str) -> bool {
    matches!(path, "lib.rs" | "main.rs")
        || (path.starts_with("bin/") && path.matches('/').count() == 1)
}

/// The file a child module `name` of the file `path` is in, if it exists.
fn child_file(path: &str, name: &str, files: &BTreeSet<&str>) -> Option<String> {
    let dir = if is_root(path) || path.ends_with("/mod.rs") || path == "mod.rs" {
        path.rsplit_once('/')
            .map(|(d, _)| format!("{d}/"))
            .unwrap_or_default()
    } else {
        format!("{}/", path.trim_end_matches(".rs"))
    };
    [format!("{dir}{name}.rs"), format!("{dir}{name}/mod.rs")]
        .into_iter()
        .find(|f| files.contains(f.as_str()))
}

/// Files declared only by `#[cfg(test)] mod x;` (and everything below them).
fn test_only_files(scanned: &BTreeMap<&str, Scanned>) -> BTreeSet<String> {
    let files: BTreeSet<&str> = scanned.keys().copied().collect();
    let mut out = BTreeSet::new();
    let mut queue: VecDeque<String> = VecDeque::new();
    for (path, s) in scanned {
        for m in &s.test_mods {
            queue.extend(child_file(path, m, &files));
        }
    }
    while let Some(f) = queue.pop_front() {
        if out.insert(f.clone()) {
            for m in scanned[f.as_str()]
                .mods
                .iter()
                .chain(&scanned[f.as_str()].test_mods)
            {
                queue.extend(child_file(&f, m, &files));
            }
        }
    }
    out
}

/// Which crate root each file belongs to, by following `mod x;` from the roots; a file no root
/// reaches is put under lib.rs (or the only root).
fn crate_roots(scanned: &BTreeMap<&str, Scanned>) -> BTreeMap<String, String> {
    let files: BTreeSet<&str> = scanned.keys().copied().collect();
    let mut root_of = BTreeMap::new();
    for root in files.iter().filter(|f| is_root(f)) {
        let mut queue = VecDeque::from([root.to_string()]);
        while let Some(f) = queue.pop_front() {
            if root_of.contains_key(&f) {
                continue;
            }
            root_of.insert(f.clone(), root.to_string());
            for m in &scanned[f.as_str()].mods {
                queue.extend(child_file(&f, m, &files));
            }
        }
    }
    let fallback = if files.contains("lib.rs") {
        "lib.rs".to_string()
    } else {
        files
            .iter()
            .find(|f| is_root(f))
            .map(|f| f.to_string())
            .unwrap_or_default()
    };
    for f in files {
        root_of
            .entry(f.to_string())
            .or_insert_with(|| fallback.clone());
    }
    root_of
}

/// File → file it names → (first line naming it, the name as written).
type FileGraph = BTreeMap<String, BTreeMap<String, (usize, String)>>;

fn file_graph(scanned: &BTreeMap<&str, Scanned>, test_only: &BTreeSet<String>) -> FileGraph {
    let root_of = crate_roots(scanned);
    // (crate root, module path) → file
    let mut by_module: BTreeMap<(String, Vec<String>), String> = BTreeMap::new();
    for path in scanned.keys() {
        if test_only.contains(*path) {
            continue;
        }
        let root = root_of[*path].clone();
        let module = module_path(path);
        if module.is_empty() && !is_root(path) {
            continue;
        }
        by_module.insert((root, module), path.to_string());
    }
    let mut graph = FileGraph::new();
    for (path, s) in scanned {
        if test_only.contains(*path) {
            continue;
        }
        let root = &root_of[*path];
        let here: Vec<String> = module_path(path);
        for (line, inline, name) in &s.names {
            let Some(target) = resolve(&here, inline, name) else {
                continue;
            };
            let file = (0..=target.len())
                .rev()
                .find_map(|n| by_module.get(&(root.clone(), target[..n].to_vec())));
            if let Some(file) = file
                && file != path
            {
                graph
                    .entry(path.to_string())
                    .or_default()
                    .entry(file.clone())
                    .or_insert_with(|| (*line, name.join("::")));
            }
        }
    }
    graph
}

/// The absolute module path `name` (starting with `crate` or `super`) denotes, seen from
/// module `here` + `inline`.
fn resolve(here: &[String], inline: &[String], name: &[String]) -> Option<Vec<String>> {
    let mut segs = name.iter().peekable();
    let mut base: Vec<String>;
    if segs.peek().map(|s| s.as_str()) == Some("crate") {
        segs.next();
        base = Vec::new();
    } else {
        base = here.iter().chain(inline).cloned().collect();
        while segs.peek().map(|s| s.as_str()) == Some("super") {
            segs.next();
            base.pop()?;
        }
    }
    base.extend(segs.filter(|s| *s != "self").cloned());
    Some(base)
}

// ---------------------------------------------------------------------------------------------
// Cycles

/// Cycles of a directed graph, each as `[a, b, …, a]`: for every strongly connected component
/// with more than one node, shortest cycles that together use every edge inside it (so each
/// edge to cut appears in some reported cycle). Self-edges are ignored.
fn find_cycles<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    let mut cycles = Vec::new();
    for component in strongly_connected(edges) {
        if component.len() < 2 {
            continue;
        }
        let inside = |n: &&str| component.contains(n);
        let mut covered: BTreeSet<(&str, &str)> = BTreeSet::new();
        for &from in &component {
            for &to in edges.get(from).into_iter().flatten().filter(|n| inside(n)) {
                if from == to || covered.contains(&(from, to)) {
                    continue;
                }
                // Shortest path to → from inside the component.
                let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
                let mut queue = VecDeque::from([to]);
                let mut seen = BTreeSet::from([to]);
                while let Some(n) = queue.pop_front() {
                    if n == from {
                        break;
                    }
                    for &m in edges.get(n).into_iter().flatten().filter(|n| inside(n)) {
                        if seen.insert(m) {
                            prev.insert(m, n);
                            queue.push_back(m);
                        }
                    }
                }
                let mut back = vec![from];
                let mut n = from;
                while n != to {
                    n = prev[n];
                    back.push(n);
                }
                back.reverse(); // to … from
                let mut cycle = vec![from];
                cycle.extend(back);
                for pair in cycle.windows(2) {
                    covered.insert((pair[0], pair[1]));
                }
                cycles.push(cycle);
            }
        }
    }
    cycles
}

/// Tarjan's strongly connected components, each sorted.
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<BTreeSet<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<BTreeSet<&'a str>>,
    }
    fn visit<'a>(n: &'a str, edges: &BTreeMap<&'a str, BTreeSet<&'a str>>, st: &mut State<'a>) {
        let i = st.index.len();
        st.index.insert(n, i);
        st.low.insert(n, i);
        st.stack.push(n);
        st.on_stack.insert(n);
        for &m in edges.get(n).into_iter().flatten() {
            if !st.index.contains_key(m) {
                visit(m, edges, st);
                let low = st.low[n].min(st.low[m]);
                st.low.insert(n, low);
            } else if st.on_stack.contains(m) {
                let low = st.low[n].min(st.index[m]);
                st.low.insert(n, low);
            }
        }
        if st.low[n] == st.index[n] {
            let mut component = BTreeSet::new();
            while let Some(m) = st.stack.pop() {
                st.on_stack.remove(m);
                component.insert(m);
                if m == n {
                    break;
                }
            }
            st.out.push(component);
        }
    }
    let mut st = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(*a).chain(bs.iter().copied()))
        .collect();
    for n in nodes {
        if !st.index.contains_key(n) {
            visit(n, edges, &mut st);
        }
    }
    st.out
}

// ---------------------------------------------------------------------------------------------
// The checker's own tests

#[cfg(test)]
mod checker {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn counts_code_lines_but_not_blanks_comments_or_tests() {
        let src = r#"//! Module doc.

/// Doc.
fn a() {
    // comment
    let x = 1; // trailing comment
    /* block
       comment */
}

#[cfg(test)]
mod tests {
    #[test]
    fn t() {}
}
"#;
        // fn a() {, let x = 1;, }
        assert_eq!(scan(src).code_lines, 3);
    }

    #[test]
    fn braces_in_strings_chars_and_lifetimes_do_not_confuse_the_matching() {
        let src = r##"
#[cfg(test)]
mod tests {
    const A: &str = "}}}";
    const B: &str = r#"}" }"#;
    const C: char = '}';
    const D: char = '\'';
    const E: &[u8] = b"}";
    fn f<'a>(x: &'a str) -> &'a str { 'outer: loop { break 'outer; } x }
    /* } nested /* } */ } */
    // }
}
fn real() {}
"##;
        assert_eq!(scan(src).code_lines, 1);
    }

    #[test]
    fn multiline_strings_count_and_nested_comments_do_not() {
        let src = "fn a() {\n    let s = \"one\n\ntwo\";\n}\n/* a /* b */ c\n d */\n";
        // `fn a() {`, the three lines of the string (its blank line too), `}`
        assert_eq!(scan(src).code_lines, 5);
    }

    #[test]
    fn test_items_of_every_shape_are_skipped() {
        let src = "
struct S {
    a: u8,
    #[cfg(test)]
    b: Vec<(u8, u8)>,
}
#[cfg(test)]
use std::fmt;
#[cfg(test)]
#[allow(dead_code)]
fn helper<A, B>(a: A, b: B) -> (A, B) {
    (a, b)
}
#[cfg(test)]
mod tests;
";
        // struct S {, a: u8,, }
        assert_eq!(scan(src).code_lines, 3);
        assert_eq!(scan(src).test_mods, vec!["tests".to_string()]);
    }

    #[test]
    fn names_are_read_from_paths_and_use_groups() {
        let s = scan(
            "use crate::{a, b::c as d, e::{f, g::*}};\nfn x() { super::h::i(); crate::j(); }\npub(crate) fn y() {}\n",
        );
        let names: Vec<String> = s.names.iter().map(|(_, _, p)| p.join("::")).collect();
        assert_eq!(
            names,
            [
                "crate::a",
                "crate::b::c",
                "crate::e::f",
                "crate::e::g",
                "super::h::i",
                "crate::j"
            ]
        );
    }

    #[test]
    fn names_resolve_to_the_longest_existing_module() {
        let f = files(&[
            ("main.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "use crate::b::inner::Thing;\n"),
            ("b/mod.rs", "pub mod inner;\nuse super::c;\n"),
            ("b/inner.rs", "use super::super::a::X;\n"),
            (
                "c.rs",
                "pub fn f() {}\n#[cfg(test)]\nmod tests { use crate::a::X; }\n",
            ),
        ]);
        let scanned: BTreeMap<&str, Scanned> =
            f.iter().map(|(p, t)| (p.as_str(), scan(t))).collect();
        let graph = file_graph(&scanned, &BTreeSet::new());
        let edges: Vec<(String, String)> = graph
            .iter()
            .flat_map(|(a, bs)| bs.keys().map(move |b| (a.clone(), b.clone())))
            .collect();
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            edges,
            [
                pair("a.rs", "b/inner.rs"),
                pair("b/inner.rs", "a.rs"),
                pair("b/mod.rs", "c.rs")
            ]
        );
    }

    #[test]
    fn finds_no_cycle_in_a_tree_or_a_diamond() {
        let edges = BTreeMap::from([
            ("a", BTreeSet::from(["b", "c"])),
            ("b", BTreeSet::from(["d"])),
            ("c", BTreeSet::from(["d", "c"])),
        ]);
        assert!(find_cycles(&edges).is_empty());
    }

    #[test]
    fn finds_every_cycle_edge_as_a_path() {
        let edges = BTreeMap::from([
            ("a", BTreeSet::from(["b"])),
            ("b", BTreeSet::from(["c", "a"])),
            ("c", BTreeSet::from(["a"])),
            ("x", BTreeSet::from(["y"])),
            ("y", BTreeSet::from(["x"])),
        ]);
        let cycles = find_cycles(&edges);
        assert_eq!(
            cycles,
            vec![
                vec!["a", "b", "a"],
                vec!["b", "c", "a", "b"],
                vec!["x", "y", "x"]
            ]
        );
    }

    #[test]
    fn the_report_lists_long_files_and_both_kinds_of_circle() {
        let long = "fn f() {\n".to_string() + &"    let _ = 1;\n".repeat(MAX_CODE_LINES) + "}\n";
        let f = files(&[
            ("lib.rs", "mod p;\nmod q;\n"),
            ("p/mod.rs", "mod one;\n"),
            ("p/one.rs", "use crate::q::Q;\n"),
            ("q.rs", &format!("use crate::p::P;\n{long}")),
        ]);
        let report = check_package(&f);
        assert!(
            report.contains(&format!("q.rs: {} lines", MAX_CODE_LINES + 3)),
            "{report}"
        );
        assert!(!report.contains("between files"), "{report}");
        assert!(report.contains("p/ → q.rs → p/"), "{report}");
    }
}
