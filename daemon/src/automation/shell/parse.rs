//! Shell text → simple commands, with `brush-parser`.
//!
//! The parser gives the structure (lists, pipelines, redirections, compound commands) with raw
//! words; each word is then split into pieces by `brush_parser::word` so that quotes can be
//! removed and every expansion seen. Nothing is expanded except what path resolution needs
//! (`~`, `$HOME`, `$PWD`, see `paths`): anything else that the shell would compute at run time is
//! either kept as an "unknown" part or makes the command not understood.

use brush_parser::ast;
use brush_parser::word::{
    self, BraceExpressionOrText, Parameter, ParameterExpr, TildeExpr, WordPiece,
    WordPieceWithSource,
};
use brush_parser::{Parser, ParserOptions};

/// How deep command substitutions are followed to look for dangers inside them.
const MAX_DEPTH: usize = 6;
/// Longer command lines are not judged (a person reads them).
const MAX_LEN: usize = 64 * 1024;
/// More brackets than any real command line has.
const MAX_NESTING: usize = 200;

/// What a word starts with, for resolving it as a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// No expansion: the word is its own text.
    Literal,
    /// `~`, `$HOME`, `${HOME}`.
    Home,
    /// `~name`.
    UserHome(String),
    /// `$PWD`, `${PWD}`, `~+`: the shell's current directory.
    Cwd,
    /// Something only known at run time (`$X`, `$1`, an expansion after literal text).
    Unknown,
}

/// One word of a command after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word without its quotes; expansions appear as written (`$HOME/x`, `~/x`).
    pub text: String,
    /// What the word starts with.
    pub base: Base,
    /// The literal text after `base` (the whole text when `base` is `Literal`).
    pub rest: String,
    /// An unquoted `*`, `?` or `[`: the shell may replace the word by matching file names.
    pub glob: bool,
    /// One literal piece: no quote concatenation (`r''m`), escapes (`\rm`) or expansions.
    pub plain: bool,
}

/// How a redirection uses its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`: reads the file.
    Read,
    /// `>`, `>|`, `<>`, `&>`, `>&file`: writes the file.
    Write,
    /// `>>`, `&>>`: appends to the file.
    Append,
    /// `>&2`, `<&0`: copies a file descriptor; the target is not a file.
    Duplicate,
    /// `<<EOF` or `<<<word`: standard input from text in the command itself.
    Here,
}

/// A redirection of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub fd: Option<i32>,
    pub kind: RedirectKind,
    /// The file (for a here-document, its delimiter).
    pub target: Word,
}

/// A command name with its arguments and redirections, as the shell would run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The words after quote removal, the command name first.
    pub argv: Vec<String>,
    /// The same words with what path resolution needs to know about them.
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Which pipeline of the command line this belongs to (0, 1, ...): commands that share a
    /// number are connected by `|`, in order.
    pub pipeline: usize,
}

impl SimpleCommand {
    /// The command name without a directory (`/usr/bin/rm` → `rm`); empty without a name.
    pub fn name(&self) -> &str {
        let n = self.argv.first().map(String::as_str).unwrap_or("");
        n.rsplit('/').next().unwrap_or(n)
    }
}

/// A simple command with what the guard needs beyond it.
#[derive(Debug, Clone)]
pub(crate) struct Scanned {
    pub cmd: SimpleCommand,
    /// Why the command is not fully understood, if it is not.
    pub problem: Option<String>,
    /// Commands the shell runs while expanding this one (`$(...)`, backticks, `<(...)`).
    pub nested: Vec<Scanned>,
}

/// Parses a command line into every simple command in it, in order. Compound commands are
/// walked too (their commands are marked not understood) so that a danger inside an `if` or a
/// subshell is still found.
pub(crate) fn scan(command: &str) -> Result<Vec<Scanned>, String> {
    if command.len() > MAX_LEN {
        return Err("the command is too long to judge".into());
    }
    // The parser recurses on nesting; deep nesting is refused before it can exhaust the stack.
    let mut open = 0usize;
    for c in command.chars() {
        match c {
            '(' | '{' | '[' | '`' => open += 1,
            _ => {}
        }
        if open > MAX_NESTING {
            return Err("the command nests too deeply to judge".into());
        }
    }
    // A parser bug must not take the daemon down: a command it cannot handle is not understood.
    std::panic::catch_unwind(|| scan_depth(command, 0))
        .unwrap_or_else(|_| Err("the shell parser failed on this command".into()))
}

fn options() -> ParserOptions {
    ParserOptions::default()
}

fn scan_depth(command: &str, depth: usize) -> Result<Vec<Scanned>, String> {
    if depth > MAX_DEPTH {
        return Err("command substitutions nested too deeply".into());
    }
    let mut parser = Parser::new(std::io::Cursor::new(command.as_bytes()), &options());
    let program = parser
        .parse_program()
        .map_err(|e| format!("the shell syntax does not parse: {e}"))?;
    let mut w = Walker {
        out: Vec::new(),
        pipeline: 0,
        depth,
    };
    for list in &program.complete_commands {
        w.list(list, None);
    }
    Ok(w.out)
}

struct Walker {
    out: Vec<Scanned>,
    pipeline: usize,
    depth: usize,
}

impl Walker {
    /// `inside` names the compound command the list belongs to, if any.
    fn list(&mut self, list: &ast::CompoundList, inside: Option<&str>) {
        for ast::CompoundListItem(and_or, _sep) in &list.0 {
            self.pipeline_(&and_or.first, inside);
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline_(p, inside);
            }
        }
    }

    fn pipeline_(&mut self, p: &ast::Pipeline, inside: Option<&str>) {
        for c in &p.seq {
            self.command(c, inside);
        }
        self.pipeline += 1;
    }

    fn command(&mut self, c: &ast::Command, inside: Option<&str>) {
        match c {
            ast::Command::Simple(s) => {
                let mut sc = self.simple(s);
                if let Some(what) = inside {
                    sc.problem.get_or_insert_with(|| format!("inside {what}"));
                }
                self.out.push(sc);
            }
            ast::Command::Compound(cc, redirects) => {
                let what = self.compound(cc);
                let what = inside.unwrap_or(what);
                self.loose_redirects(redirects.as_ref(), what);
            }
            ast::Command::Function(f) => {
                let what = inside.unwrap_or("a function definition");
                let ast::FunctionBody(cc, redirects) = &f.body;
                self.compound(cc);
                self.loose_redirects(redirects.as_ref(), what);
            }
            ast::Command::ExtendedTest(_, redirects) => {
                let what = inside.unwrap_or("a [[ ]] test");
                self.loose_redirects(redirects.as_ref(), what);
            }
        }
    }

    /// Walks a compound command's lists; returns what it is.
    fn compound(&mut self, cc: &ast::CompoundCommand) -> &'static str {
        use ast::CompoundCommand as C;
        match cc {
            C::BraceGroup(b) => {
                self.list(&b.list, Some("a { } group"));
                "a { } group"
            }
            C::Subshell(s) => {
                self.list(&s.list, Some("a subshell"));
                "a subshell"
            }
            C::ForClause(f) => {
                self.list(&f.body.list, Some("a for loop"));
                "a for loop"
            }
            C::ArithmeticForClause(f) => {
                self.list(&f.body.list, Some("a for loop"));
                "a for loop"
            }
            C::CaseClause(c) => {
                for item in &c.cases {
                    if let Some(l) = &item.cmd {
                        self.list(l, Some("a case"));
                    }
                }
                "a case"
            }
            C::IfClause(i) => {
                self.list(&i.condition, Some("an if"));
                self.list(&i.then, Some("an if"));
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, Some("an if"));
                    }
                    self.list(&e.body, Some("an if"));
                }
                "an if"
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0, Some("a loop"));
                self.list(&w.1.list, Some("a loop"));
                "a loop"
            }
            C::Coprocess(c) => {
                self.command(&c.body, Some("a coprocess"));
                "a coprocess"
            }
            C::Arithmetic(_) => "an arithmetic command",
        }
    }

    /// The redirections of a compound command, as a command without words, so that their
    /// targets are still checked.
    fn loose_redirects(&mut self, redirects: Option<&ast::RedirectList>, what: &str) {
        let mut sc = Scanned {
            cmd: SimpleCommand {
                argv: Vec::new(),
                words: Vec::new(),
                redirects: Vec::new(),
                pipeline: self.pipeline,
            },
            problem: Some(format!("{what} (only simple commands are understood)")),
            nested: Vec::new(),
        };
        for r in redirects.map(|l| l.0.as_slice()).unwrap_or(&[]) {
            self.redirect(r, &mut sc);
        }
        self.out.push(sc);
    }

    fn simple(&mut self, s: &ast::SimpleCommand) -> Scanned {
        let mut sc = Scanned {
            cmd: SimpleCommand {
                argv: Vec::new(),
                words: Vec::new(),
                redirects: Vec::new(),
                pipeline: self.pipeline,
            },
            problem: None,
            nested: Vec::new(),
        };
        let prefix = s.prefix.as_ref().map(|p| p.0.as_slice()).unwrap_or(&[]);
        let suffix = s.suffix.as_ref().map(|p| p.0.as_slice()).unwrap_or(&[]);
        for item in prefix {
            self.item(item, true, &mut sc);
        }
        if let Some(name) = &s.word_or_name {
            self.word(&name.value, &mut sc);
        }
        for item in suffix {
            self.item(item, false, &mut sc);
        }
        if sc.cmd.argv.is_empty() && sc.problem.is_none() {
            sc.problem = Some("no command name".into());
        }
        sc
    }

    fn item(&mut self, item: &ast::CommandPrefixOrSuffixItem, prefix: bool, sc: &mut Scanned) {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::IoRedirect(r) => self.redirect(r, sc),
            I::Word(w) => self.word(&w.value, sc),
            // After the name, `of=x` is an ordinary argument (`dd of=x`).
            I::AssignmentWord(_, w) if !prefix => self.word(&w.value, sc),
            I::AssignmentWord(_, w) => {
                // `X=y cmd` changes what cmd does (`PATH=`, `LD_PRELOAD=`, `GIT_SSH_COMMAND=`).
                let _ = self.convert(&w.value, sc);
                problem(sc, "a variable assignment");
            }
            I::ProcessSubstitution(_, sub) => {
                problem(sc, "a process substitution");
                self.nested_list(&sub.list, sc);
            }
        }
    }

    fn word(&mut self, raw: &str, sc: &mut Scanned) {
        let w = self.convert(raw, sc);
        sc.cmd.argv.push(w.text.clone());
        sc.cmd.words.push(w);
    }

    fn redirect(&mut self, r: &ast::IoRedirect, sc: &mut Scanned) {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        let (fd, kind, target) = match r {
            R::File(fd, kind, target) => {
                let raw = match target {
                    T::Filename(w) => w.value.clone(),
                    T::Fd(n) => n.to_string(),
                    T::Duplicate(w) => w.value.clone(),
                    T::ProcessSubstitution(_, sub) => {
                        problem(sc, "a process substitution");
                        self.nested_list(&sub.list, sc);
                        return;
                    }
                };
                let kind = match kind {
                    K::Read => RedirectKind::Read,
                    K::Write | K::Clobber | K::ReadAndWrite => RedirectKind::Write,
                    K::Append => RedirectKind::Append,
                    K::DuplicateInput | K::DuplicateOutput => {
                        // `>&2` copies a descriptor; `>&file` (not a number or `-`) writes a file.
                        let is_fd = raw == "-"
                            || raw
                                .trim_end_matches('-')
                                .chars()
                                .all(|c| c.is_ascii_digit());
                        if is_fd {
                            RedirectKind::Duplicate
                        } else if matches!(kind, K::DuplicateOutput) {
                            RedirectKind::Write
                        } else {
                            RedirectKind::Read
                        }
                    }
                };
                (*fd, kind, raw)
            }
            R::OutputAndError(w, append) => (
                None,
                if *append {
                    RedirectKind::Append
                } else {
                    RedirectKind::Write
                },
                w.value.clone(),
            ),
            R::HereString(fd, w) => (*fd, RedirectKind::Here, w.value.clone()),
            R::HereDocument(fd, doc) => {
                if doc.requires_expansion {
                    // An unquoted delimiter: `$(...)` in the body runs.
                    self.here_body(&doc.doc.value, sc);
                }
                (*fd, RedirectKind::Here, doc.here_end.value.clone())
            }
        };
        let target = self.convert(&target, sc);
        sc.cmd.redirects.push(Redirect { fd, kind, target });
    }

    fn here_body(&mut self, body: &str, sc: &mut Scanned) {
        match word::parse_heredoc(body, &options()) {
            Ok(pieces) => {
                let mut b = Build::default();
                self.pieces(&pieces, body, true, &mut b, sc);
            }
            Err(_) => problem(sc, "a here-document that does not parse"),
        }
    }

    fn nested_list(&mut self, list: &ast::CompoundList, sc: &mut Scanned) {
        let mut inner = Walker {
            out: Vec::new(),
            pipeline: 0,
            depth: self.depth + 1,
        };
        inner.list(list, None);
        sc.nested.extend(inner.out);
    }

    fn nested_text(&mut self, text: &str, sc: &mut Scanned) {
        match scan_depth(text, self.depth + 1) {
            Ok(v) => sc.nested.extend(v),
            Err(e) => problem(sc, &e),
        }
    }

    fn convert(&mut self, raw: &str, sc: &mut Scanned) -> Word {
        let mut b = Build::default();
        match word::parse(raw, &options()) {
            Ok(pieces) => {
                b.top_pieces = pieces.len();
                self.pieces(&pieces, raw, false, &mut b, sc);
            }
            Err(_) => {
                problem(sc, "a word that does not parse");
                b.text = raw.to_string();
                b.base = Some(Base::Unknown);
            }
        }
        if b.skeleton.contains('{')
            && let Ok(Some(parts)) = word::parse_brace_expansions(&b.skeleton, &options())
            && parts
                .iter()
                .any(|p| matches!(p, BraceExpressionOrText::Expr(_)))
        {
            problem(sc, "a brace expansion");
        }
        let base = b.base.unwrap_or(Base::Literal);
        Word {
            rest: if base == Base::Literal {
                b.text.clone()
            } else {
                b.rest
            },
            plain: b.top_pieces == 1 && b.simple && base == Base::Literal,
            text: b.text,
            base,
            glob: b.glob,
        }
    }

    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        raw: &str,
        quoted: bool,
        b: &mut Build,
        sc: &mut Scanned,
    ) {
        for p in pieces {
            let src = raw.get(p.start_index..p.end_index).unwrap_or("");
            match &p.piece {
                WordPiece::Text(s) => {
                    if !quoted && s.contains(['*', '?', '[']) {
                        b.glob = true;
                    }
                    b.literal(s, !quoted);
                }
                WordPiece::SingleQuotedText(s) => b.literal(s, false),
                WordPiece::AnsiCQuotedText(s) => {
                    b.literal(s, false);
                    if s.contains('\\') {
                        // Escapes such as `\x2e` are not decoded here: the text is not what runs.
                        b.expansion(src, Base::Unknown);
                        b.simple = false;
                    }
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    if inner.len() > 1
                        || inner.iter().any(|i| !matches!(i.piece, WordPiece::Text(_)))
                    {
                        b.simple = false;
                    }
                    self.pieces(inner, raw, true, b, sc);
                }
                WordPiece::TildeExpansion(t) => {
                    b.simple = false;
                    let base = match t {
                        TildeExpr::Home => Base::Home,
                        TildeExpr::UserHome(u) => Base::UserHome(u.clone()),
                        TildeExpr::WorkingDir => Base::Cwd,
                        _ => Base::Unknown,
                    };
                    b.expansion(src, base);
                }
                WordPiece::ParameterExpansion(e) => {
                    b.simple = false;
                    let base = match e {
                        ParameterExpr::Parameter {
                            parameter: Parameter::Named(n),
                            indirect: false,
                        } => match n.as_str() {
                            "HOME" => Base::Home,
                            "PWD" => Base::Cwd,
                            _ => Base::Unknown,
                        },
                        ParameterExpr::Parameter {
                            parameter: Parameter::Positional(_) | Parameter::Special(_),
                            indirect: false,
                        } => Base::Unknown,
                        _ => {
                            // Operators such as `${X:-$(cmd)}` can run code or hide text.
                            problem(sc, "a parameter expansion with an operator");
                            Base::Unknown
                        }
                    };
                    b.expansion(src, base);
                }
                WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
                    b.simple = false;
                    problem(sc, "a command substitution");
                    self.nested_text(s, sc);
                    b.expansion(src, Base::Unknown);
                }
                WordPiece::EscapeSequence(s) => {
                    b.simple = false;
                    let c = s.strip_prefix('\\').unwrap_or(s);
                    b.literal(c, false);
                }
                WordPiece::ArithmeticExpression(_) => {
                    b.simple = false;
                    // `$(( a[$(cmd)] ))` runs cmd.
                    problem(sc, "an arithmetic expansion");
                    b.expansion(src, Base::Unknown);
                }
            }
        }
    }
}

/// A word being put together from its pieces.
struct Build {
    text: String,
    rest: String,
    /// The word with every quoted or expanded character replaced, for brace detection.
    skeleton: String,
    base: Option<Base>,
    glob: bool,
    simple: bool,
    top_pieces: usize,
}

impl Default for Build {
    fn default() -> Self {
        Build {
            text: String::new(),
            rest: String::new(),
            skeleton: String::new(),
            base: None,
            glob: false,
            simple: true,
            top_pieces: 0,
        }
    }
}

impl Build {
    fn literal(&mut self, s: &str, unquoted: bool) {
        self.text.push_str(s);
        self.rest.push_str(s);
        if unquoted {
            self.skeleton.push_str(s);
        } else {
            self.skeleton.extend(s.chars().map(|_| 'q'));
        }
    }

    fn expansion(&mut self, src: &str, base: Base) {
        self.base = Some(if self.text.is_empty() && self.base.is_none() {
            base
        } else {
            Base::Unknown
        });
        self.text.push_str(src);
        self.skeleton.push('q');
    }
}

fn problem(sc: &mut Scanned, why: &str) {
    sc.problem.get_or_insert_with(|| why.to_string());
}
