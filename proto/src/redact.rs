//! Secret redaction for everything that leaves the machine.
//!
//! CLI output routinely contains secrets: `env` dumps, `git remote -v` with a token in the
//! URL, `curl -H "Authorization: …"`, a `.env` file the agent printed, a private key it
//! `cat`ed. Chat messages are stored by a third party and pushed to phones, so every
//! outgoing text goes through [`redact`] (or a [`Redactor`] that also knows the gateway's
//! own tokens) first. Redact the complete text before chunking: a secret split across two
//! messages or two streaming deltas would slip past the patterns.
//!
//! A secret is replaced by a marker that keeps a short, non-secret prefix so a human can
//! still tell what it was: `sk-ant-api03-…[redacted]`, `ghp_…[redacted]`,
//! `123456789:…[redacted]` (a Telegram bot id is public), `password=…[redacted]`,
//! `https://user:…[redacted]@host`. Redacting twice gives the same text as once.
//!
//! # What is recognised
//!
//! * Private key blocks `-----BEGIN … PRIVATE KEY----- … -----END … PRIVATE KEY-----`
//!   (RSA, EC, OpenSSH, PKCS#8, encrypted, PGP `… PRIVATE KEY BLOCK`); a block whose END
//!   line is missing (truncated output) is redacted through its last base64 line, and one
//!   whose BEGIN line is missing (output cut at the top) from its first base64 line.
//! * Credentials of tools: `.netrc` (`machine H login U password P`, or `password P` alone
//!   on a line), `.pgpass` lines (`host:port:db:user:password`), `mysql -pP`, `curl -u U:P`
//!   / `--user U:P`, Slack webhook URLs (`https://hooks.slack.com/services/…`), Azure
//!   connection strings (`AccountKey=…`, `SharedAccessKey=…`, up to the `;`).
//! * Credentials in URLs: `scheme://user:password@` (the user is kept).
//! * `Authorization:` / `Proxy-Authorization:` header values, and `Bearer …` anywhere.
//! * Vendor keys by their prefix: Anthropic `sk-ant-…`, OpenAI `sk-…` / `sk-proj-…`,
//!   Stripe `sk_live_`/`rk_live_`/`whsec_`, GitHub `ghp_ gho_ ghu_ ghs_ ghr_ github_pat_`,
//!   GitLab `glpat-`, npm `npm_`, Hugging Face `hf_`, Slack `xox[abprse]-` / `xapp-`,
//!   Google `AIza…` API keys, `ya29.` OAuth tokens and `GOCSPX-` client secrets, AWS
//!   access key ids `AKIA`/`ASIA`/`ABIA`/`ACCA` + 16.
//! * Telegram bot tokens `<bot id>:<30+ chars>`, Discord bot tokens (three dot-separated
//!   base64url parts), JWTs (`eyJ….eyJ….…`).
//! * Assignments whose key ends in `password`, `passwd`, `passphrase`, `secret`, `token`,
//!   `api_key`/`apikey`, `access_key`, `secret_key`, `private_key`, `signing_key`,
//!   `client_secret`, `credential(s)`, `signature` or `auth` (any case, any prefix:
//!   `DB_PASSWORD`, `aws_secret_access_key`, `X-Api-Key`, `"SecretAccessKey"`) in env
//!   files, shell, URL query strings, JSON, YAML and `--password value` flags.
//!
//! # Trade-offs (false positives vs. misses)
//!
//! * **No entropy guessing.** Hex hashes, git SHAs, UUIDs, checksums, base64 images and
//!   other random-looking strings are left alone unless a rule above gives them a
//!   context. Nuking every long random string would make diffs, logs and `git log`
//!   unreadable, and it is what the caller can read that matters here. The cost: a bare
//!   secret with no known prefix and no `key=` context (a raw hex API key pasted alone)
//!   passes. Add such secrets as literals with [`Redactor::with_secrets`].
//! * **Word boundaries** (ASCII) are required before prefixed tokens, so a token prefix
//!   that happens to occur inside a base64 blob (`…xAIza…`) does not match. Tokens
//!   preceded by `/`, `+`, `=` or `:` still match.
//! * **Shapes are checked** where a prefix alone is weak: OpenAI `sk-` keys, Slack and
//!   `hf_` tokens must contain a digit; alphanumeric-only formats (GitHub classic, npm,
//!   `hf_`, Stripe) stop at the first other character; a Telegram token's secret part must
//!   not be all lowercase hex, so `1234567:<git sha>` survives.
//! * **Assignments vs. code.** `token = get_token()`, `password = os.environ["PW"]`,
//!   `let token = Token::new();` (a call or index follows), `token: String` and
//!   `password: &str` (type annotations), placeholders (`None`, `null`, `true`, `$VAR`,
//!   `${VAR}`, `{{ x }}`, `<your-token>`, `****`, `xxx`) and `==`/`=>` are not redacted.
//!   After a `:` an unquoted value must look like a secret (at least 6 characters with a
//!   digit, or 16 characters), so `Password: incorrect` survives and `password: hunter2`
//!   does not. After `=` any other value is redacted, so `token = self.token` is a false
//!   positive we accept. The key must *end* in the keyword, so `max_tokens=4096`,
//!   `tokenizer=…`, `token_count=…` and `PWD=/home/x` are untouched.
//! * **Prose**: `Bearer` needs a value of at least 16 characters, an `Authorization`
//!   value needs a digit or 16 characters, so "the bearer of bad news" and
//!   "authorization: required" survive.
//! * A candidate that fails its shape check is left as it is, and text inside it is not
//!   searched again (one pass, leftmost match wins). Secrets hidden by ANSI escapes or
//!   split across lines are not found: strip escapes first.
//!
//! # Cost
//!
//! All patterns are one regex compiled once ([`LazyLock`]), run in a single pass; text
//! without a match is returned borrowed, without a copy. Only ASCII word boundaries are
//! used so the lazy DFA also runs on CJK and emoji text.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What replaces the secret part of a match.
pub const MARKER: &str = "…[redacted]";

/// Shortest literal accepted by [`Redactor::with_secrets`]: shorter strings occur in
/// ordinary text too often to blank out everywhere.
pub const MIN_LITERAL_LEN: usize = 8;

/// Redacts the secrets the module docs list, with the default rules. Returns the input
/// unchanged (borrowed) when there is nothing to redact.
pub fn redact(text: &str) -> Cow<'_, str> {
    redact_patterns(text, &mut 0)
}

/// Whether [`redact`] would change `text`.
pub fn contains_secret(text: &str) -> bool {
    let mut count = 0;
    redact_patterns(text, &mut count);
    count > 0
}

/// A redactor that also blanks out exact strings the gateway knows are secret: its own bot
/// tokens and app secrets, the pairing code, tokens from its config. Those are redacted
/// first and completely (no prefix is kept), then the default rules apply.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    literals: Option<Regex>,
}

/// Why a [`Redactor`] could not be built. Never contains the secret itself.
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    /// A literal secret is shorter than [`MIN_LITERAL_LEN`] characters.
    #[error("a literal secret must have at least {MIN_LITERAL_LEN} characters; one has {len}")]
    TooShort {
        /// Its length in characters.
        len: usize,
    },
    /// The literals are too many or too long to compile into one pattern.
    #[error("literal secrets do not fit in a pattern: {0}")]
    Pattern(#[from] regex::Error),
}

impl Redactor {
    /// The default rules only.
    pub fn new() -> Self {
        Redactor::default()
    }

    /// The default rules plus these exact strings.
    pub fn with_secrets<I, S>(secrets: I) -> Result<Self, RedactError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list: Vec<String> = Vec::new();
        for s in secrets {
            let s = s.as_ref();
            let len = s.chars().count();
            if len < MIN_LITERAL_LEN {
                return Err(RedactError::TooShort { len });
            }
            list.push(regex::escape(s));
        }
        if list.is_empty() {
            return Ok(Redactor::default());
        }
        // Longest first, so a secret that contains another is replaced whole.
        list.sort_by_key(|s| std::cmp::Reverse(s.len()));
        list.dedup();
        let literals = Regex::new(&list.join("|"))?;
        Ok(Redactor {
            literals: Some(literals),
        })
    }

    /// Redacts `text`.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_counted(text).0
    }

    /// Redacts `text` and says how many secrets were replaced (for an audit log line that
    /// must not contain them).
    pub fn redact_counted<'a>(&self, text: &'a str) -> (Cow<'a, str>, usize) {
        let mut count = 0;
        let first = match &self.literals {
            Some(re) => re.replace_all(text, |_: &Captures<'_>| {
                count += 1;
                MARKER
            }),
            None => Cow::Borrowed(text),
        };
        let out = match first {
            Cow::Borrowed(t) => redact_patterns(t, &mut count),
            Cow::Owned(t) => Cow::Owned(redact_patterns(&t, &mut count).into_owned()),
        };
        (out, count)
    }
}

/// The rules, in priority order for matches that start at the same place.
const RULES: &[&str] = &[
    // Private key blocks: to the END line, or through the base64 lines if it is missing.
    r"(?P<pk>-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----)(?P<pk_body>[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|(?:[ \t]*\r?\n[ \t]*(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+:[^\n]*))*)",
    // A private key whose BEGIN line was cut off: its base64 lines up to the END line.
    r"(?P<pkt>(?m:^)[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*\r?\n(?:[ \t]*[A-Za-z0-9+/=]{4,}[ \t]*\r?\n)*[ \t]*)(?P<pkt_end>-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----)",
    // Slack incoming webhooks: the whole path is the credential.
    r"(?P<slack>(?-u:\b)https://hooks\.slack\.com/services/)(?P<slack_val>[A-Za-z0-9_/-]{8,})",
    // Azure storage / Service Bus connection strings: `AccountKey=…` up to `;`.
    r#"(?P<az>(?-u:\b)(?i:AccountKey|SharedAccessKey)[ \t]*=[ \t]*)(?P<az_val>[^;\s"'<>]+)"#,
    // curl -u user:password / --user user:password (the user is kept).
    r#"(?P<curl>(?-u:\b)curl(?:[ \t][^\n]*?)?[ \t](?:-u|--user)(?:[ \t]+|=)?["']?[^\s:"']*:)(?P<curl_val>[^\s"']+)"#,
    // mysql -pSECRET (a bare `-p` asks for it: left alone).
    r#"(?P<my>(?-u:\b)(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)(?:[ \t][^\n]*?)?[ \t]-p)(?P<my_val>'[^'\n]*'|"[^"\n]*"|[^\s'"-][^\s]*)"#,
    // .netrc: `machine HOST login USER password SECRET`, or `password SECRET` on its own line.
    r"(?P<netrc>(?m:^)[ \t]*(?:(?:machine[ \t]+[^\s]+|default)[ \t]+login[ \t]+[^\s]+(?:[ \t]+account[ \t]+[^\s]+)?[ \t]+)?password[ \t]+)(?P<netrc_val>[^\s=:][^\s]*)(?P<netrc_rest>[^\n]*)",
    // .pgpass: `host:port:database:user:password`, the password to the end of the line.
    r"(?P<pg>(?m:^)[ \t]*[^\s:#][^\s:]*:(?:[0-9]{1,5}|\*):[^\s:]+:[^\s:]+:)(?P<pg_val>(?:\\.|[^\s:\\])+)[ \t]*\r?(?m:$)",
    // scheme://user:password@
    r#"(?P<url>(?-u:\b)[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@"'<>]*:)(?P<url_val>[^\s/?#@"'<>]+)@"#,
    // Authorization headers, with an optional scheme word.
    r#"(?P<auth>(?-u:\b)(?i:proxy-authorization|authorization)["']?[ \t]*[:=][ \t]*["']?(?:(?i:bearer|basic|token|bot|digest|negotiate)[ \t]+)?)(?P<auth_val>[^\s"',;]+)"#,
    r"(?P<bearer>(?-u:\b)(?i:bearer)[ \t]+)(?P<bearer_val>[A-Za-z0-9._~+/-]{8,}=*)",
    // Vendor prefixes; the shape is checked per prefix in `check_token`.
    r"(?-u:\b)(?P<tok>sk-ant-(?:[a-z]{2,8}[0-9]{2}-)?|sk-(?:proj-|svcacct-|admin-)?|(?:sk|rk)_(?:live|test)_|whsec_|gh[pousr]_|github_pat_|glpat-|npm_|hf_|xox[abprse]-|xapp-|AIza|ya29\.|GOCSPX-)(?P<tok_val>[A-Za-z0-9_-]{8,})",
    r"(?-u:\b)(?P<aws>AKIA|ASIA|ABIA|ACCA)(?P<aws_val>[0-9A-Z]{16})(?-u:\b)",
    // Telegram: no leading boundary, so `…/bot123456:ABC…` in API URLs matches.
    r"(?P<tg>[0-9]{6,}:)(?P<tg_val>[A-Za-z0-9_-]{30,})",
    r"(?-u:\b)(?P<jwt>eyJ)(?P<jwt_val>[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)",
    r"(?-u:\b)(?P<dc>[MNO][A-Za-z0-9_-]{3})(?P<dc_val>[A-Za-z0-9_-]{19,24}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,})",
    // --password VALUE
    r"(?P<flag>--(?i:[a-z0-9-]*(?:password|passwd|token|secret|api-key|apikey))[ \t]+)(?P<flag_val>[^\s-]\S*)",
    // KEY=VALUE, KEY: VALUE, "key": "value", KEY := VALUE
    r#"(?P<kv>(?-u:\b)(?i:[a-z0-9_.-]*?(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|signing[_-]?key|client[_-]?secret|credentials?|signature|auth))["']?[ \t]*(?P<kv_sep>:=|=|:)[ \t]*)(?P<kv_val>"[^"\n]*"|'[^'\n]*'|[^\s"'&;,<>(){}\[\]`=:][^\s"'&;,<>(){}\[\]`]*)(?P<kv_call>[(\[])?"#,
];

static PATTERN: LazyLock<Regex> = LazyLock::new(|| {
    // The rules are constants; `rules_compile` proves they do.
    #[allow(clippy::expect_used)]
    Regex::new(&RULES.join("|")).expect("redaction rules compile")
});

fn redact_patterns<'a>(text: &'a str, count: &mut usize) -> Cow<'a, str> {
    let before = *count;
    let out = PATTERN.replace_all(text, |caps: &Captures<'_>| {
        let whole = caps.get(0).map_or("", |m| m.as_str());
        match replacement(caps) {
            Some(r) if r != whole => {
                *count += 1;
                r
            }
            _ => whole.to_string(),
        }
    });
    // Matches that were all left as they were (placeholders, already redacted text) are
    // not a change: hand back the input, uncopied.
    if *count == before {
        Cow::Borrowed(text)
    } else {
        out
    }
}

/// What a match becomes, or `None` to leave it as it is.
fn replacement(caps: &Captures<'_>) -> Option<String> {
    let g = |name: &str| caps.name(name).map(|m| m.as_str());
    if let Some(begin) = g("pk") {
        let body = g("pk_body").unwrap_or_default();
        let end = body
            .rfind("-----END")
            .map(|i| format!("\n{}", &body[i..]))
            .unwrap_or_default();
        return Some(format!("{begin}\n{MARKER}{end}"));
    }
    if let Some(end) = g("pkt_end") {
        return Some(format!("{MARKER}\n{end}"));
    }
    if let Some(pre) = g("slack") {
        return Some(format!("{pre}{MARKER}"));
    }
    if let Some(pre) = g("az") {
        let val = g("az_val").unwrap_or_default();
        return (!is_placeholder(val)).then(|| format!("{pre}{MARKER}"));
    }
    // A command line: what comes before the password may hold secrets of its own.
    for (pre, val) in [("curl", "curl_val"), ("my", "my_val")] {
        if let Some(head) = g(pre) {
            let v = g(val).unwrap_or_default();
            let head = redact_patterns(head, &mut 0);
            return Some(if is_placeholder(v) {
                format!("{head}{v}")
            } else {
                format!("{head}{MARKER}")
            });
        }
    }
    if let Some(pre) = g("netrc") {
        let val = g("netrc_val").unwrap_or_default();
        let rest = g("netrc_rest").unwrap_or_default();
        let alone = pre.trim_start().starts_with("password");
        // On its own line, a word of prose ("password reset") is not taken for a password.
        let plausible = !alone
            || (rest.trim().is_empty()
                && (val.chars().count() >= 12 || val.chars().any(|c| !c.is_alphabetic())));
        let val = if plausible && !is_placeholder(val) {
            MARKER
        } else {
            val
        };
        // The rest of the line is searched too (this match hides it from the other rules).
        return Some(format!("{pre}{val}{}", redact_patterns(rest, &mut 0)));
    }
    if let Some(pre) = g("pg") {
        let whole = caps.get(0).map_or("", |m| m.as_str());
        let val = g("pg_val").unwrap_or_default();
        let tail = whole.get(pre.len() + val.len()..).unwrap_or_default();
        return (!is_placeholder(val)).then(|| format!("{pre}{MARKER}{tail}"));
    }
    if let Some(pre) = g("url") {
        let val = g("url_val").unwrap_or_default();
        return Some(format!("{pre}{}@", secret_value(val)));
    }
    if let Some(pre) = g("auth") {
        let val = g("auth_val").unwrap_or_default();
        let plausible = val.chars().count() >= 16 || val.bytes().any(|b| b.is_ascii_digit());
        return (plausible && !is_placeholder(val)).then(|| format!("{pre}{}", secret_value(val)));
    }
    if let Some(pre) = g("bearer") {
        let val = g("bearer_val").unwrap_or_default();
        return (val.len() >= 16 && !is_placeholder(val))
            .then(|| format!("{pre}{}", secret_value(val)));
    }
    if let Some(prefix) = g("tok") {
        return check_token(prefix, g("tok_val").unwrap_or_default());
    }
    if let Some(prefix) = g("aws") {
        return Some(format!("{prefix}{MARKER}"));
    }
    if let Some(prefix) = g("tg") {
        let val = g("tg_val").unwrap_or_default();
        let all_hex = val.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        return (!all_hex).then(|| format!("{prefix}{MARKER}"));
    }
    if let Some(prefix) = g("jwt") {
        return Some(format!("{prefix}{MARKER}"));
    }
    if let Some(prefix) = g("dc") {
        let val = g("dc_val").unwrap_or_default();
        return has_digit(prefix, val).then(|| format!("{prefix}{MARKER}"));
    }
    if let Some(pre) = g("flag") {
        let val = g("flag_val").unwrap_or_default();
        return (!is_placeholder(val)).then(|| format!("{pre}{}", secret_value(val)));
    }
    if let Some(pre) = g("kv") {
        let val = g("kv_val").unwrap_or_default();
        let call = g("kv_call").unwrap_or_default();
        let (quote, inner) = match val.chars().next() {
            Some(q @ ('"' | '\'')) if val.len() >= 2 => (q.to_string(), &val[1..val.len() - 1]),
            _ => (String::new(), val),
        };
        if inner.is_empty() || is_placeholder(inner) || (quote.is_empty() && !call.is_empty()) {
            return None;
        }
        if quote.is_empty() && g("kv_sep") == Some(":") {
            let n = inner.chars().count();
            let looks_secret = (n >= 6 && inner.bytes().any(|b| b.is_ascii_digit())) || n >= 16;
            if !looks_secret {
                return None;
            }
        }
        return Some(format!("{pre}{quote}{}{quote}{call}", secret_value(inner)));
    }
    None
}

/// A secret value in a context (header, assignment, URL): if it is itself a recognised
/// token, its own marker (which keeps the token's prefix), else the bare marker.
fn secret_value(val: &str) -> String {
    match redact_patterns(val, &mut 0) {
        Cow::Owned(r) => r,
        Cow::Borrowed(_) => MARKER.to_string(),
    }
}

fn has_digit(a: &str, b: &str) -> bool {
    a.bytes().chain(b.bytes()).any(|c| c.is_ascii_digit())
}

/// The shape checks for vendor-prefixed tokens. `val` is everything after the prefix up to
/// the first character outside `[A-Za-z0-9_-]`.
fn check_token(prefix: &str, val: &str) -> Option<String> {
    // (minimum length, alphanumeric only, must contain a digit)
    let (min, alnum_only, digit) = match prefix {
        p if p.starts_with("sk-ant-") => (20, false, false),
        p if p.starts_with("sk-") => (20, false, true),
        p if p.starts_with("sk_") || p.starts_with("rk_") => (16, true, false),
        "whsec_" => (20, true, false),
        "github_pat_" => (22, false, false),
        "glpat-" => (20, false, false),
        "npm_" => (30, true, false),
        "hf_" => (30, true, true),
        "xapp-" => (10, false, true),
        p if p.starts_with("xox") => (10, false, true),
        "AIza" => (35, false, false),
        "ya29." | "GOCSPX-" => (20, false, false),
        // gh[pousr]_
        _ => (30, true, false),
    };
    let (secret, rest) = if alnum_only {
        let n = val.bytes().take_while(u8::is_ascii_alphanumeric).count();
        val.split_at(n)
    } else {
        (val, "")
    };
    let ok = secret.len() >= min && (!digit || secret.bytes().any(|b| b.is_ascii_digit()));
    ok.then(|| format!("{prefix}{MARKER}{rest}"))
}

/// Values that are clearly not secrets: empty, code words, variable references, template
/// placeholders, masks, and our own marker (so redaction is idempotent).
fn is_placeholder(v: &str) -> bool {
    const WORDS: &[&str] = &[
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "string",
        "str",
        "required",
        "optional",
        "redacted",
        "changeme",
        "example",
    ];
    let v = v.trim();
    let Some(first) = v.chars().next() else {
        return true;
    };
    let same_char = v.chars().all(|c| c == first) && v.chars().count() >= 3;
    WORDS.iter().any(|w| v.eq_ignore_ascii_case(w))
        || matches!(first, '$' | '%' | '{' | '<' | '*' | '…')
        || same_char
        || v.contains(MARKER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> String {
        redact(s).into_owned()
    }

    #[test]
    fn rules_compile() {
        for rule in RULES {
            if let Err(e) = Regex::new(rule) {
                panic!("{rule}: {e}");
            }
        }
        LazyLock::force(&PATTERN);
    }

    #[test]
    fn vendor_keys_keep_their_prefix() {
        let cases = [
            (
                "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdEFGH",
                "sk-ant-api03-…[redacted]",
            ),
            (
                "sk-ant-oat01-AbCdEfGhIjKlMnOpQrStUvWx012345",
                "sk-ant-oat01-…[redacted]",
            ),
            (
                "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90_uv-wx",
                "sk-proj-…[redacted]",
            ),
            (
                "sk-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34",
                "sk-…[redacted]",
            ),
            ("sk_live_51HxYzAbCdEfGhIjKlMnOp", "sk_live_…[redacted]"),
            ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIza…[redacted]"),
            (
                "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123",
                "ghp_…[redacted]",
            ),
            (
                "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123",
                "gho_…[redacted]",
            ),
            (
                "ghs_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123",
                "ghs_…[redacted]",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS",
                "github_pat_…[redacted]",
            ),
            ("glpat-AbCdEfGhIjKlMnOpQrSt", "glpat-…[redacted]"),
            (
                "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
                "npm_…[redacted]",
            ),
            ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "hf_…[redacted]"),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                "xoxb-…[redacted]",
            ),
            ("xoxp-123456789012-1234567890123", "xoxp-…[redacted]"),
            ("AKIAIOSFODNN7EXAMPLE", "AKIA…[redacted]"),
            ("ASIAIOSFODNN7EXAMPLE", "ASIA…[redacted]"),
            ("ya29.a0AfH6SMBxAbCdEfGhIjKlMnOp", "ya29.…[redacted]"),
            (
                "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
                "123456789:…[redacted]",
            ),
            (
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "eyJ…[redacted]",
            ),
            (
                "MTA4OTQ1NjEyMzQ1Njc4OTAx.GbCdEf.AbCdEfGhIjKlMnOpQrStUvWxYz0123456",
                "MTA4…[redacted]",
            ),
        ];
        for (secret, want) in cases {
            assert_eq!(r(secret), want, "{secret}");
            // In context too.
            assert_eq!(
                r(&format!("key is {secret}, ok")),
                format!("key is {want}, ok")
            );
        }
    }

    #[test]
    fn telegram_token_inside_an_api_url() {
        assert_eq!(
            r("GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe"),
            "GET https://api.telegram.org/bot123456789:…[redacted]/getMe"
        );
    }

    #[test]
    fn headers() {
        assert_eq!(
            r("curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://x"),
            "curl -H 'Authorization: Bearer …[redacted]' https://x"
        );
        assert_eq!(
            r("Authorization: token ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123"),
            "Authorization: token ghp_…[redacted]"
        );
        assert_eq!(
            r("authorization: Basic dXNlcjpwYXNzd29yZA=="),
            "authorization: Basic …[redacted]"
        );
        assert_eq!(
            r(
                "Authorization: Bot MTA4OTQ1NjEyMzQ1Njc4OTAx.GbCdEf.AbCdEfGhIjKlMnOpQrStUvWxYz0123456"
            ),
            "Authorization: Bot MTA4…[redacted]"
        );
        assert_eq!(
            r("use bearer AbCdEfGhIjKlMnOp1234 here"),
            "use bearer …[redacted] here"
        );
        assert_eq!(
            r(r#"{"Authorization":"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig123456"}"#),
            r#"{"Authorization":"Bearer eyJ…[redacted]"}"#
        );
    }

    #[test]
    fn url_credentials() {
        assert_eq!(
            r("https://alice:s3cret@example.com/x"),
            "https://alice:…[redacted]@example.com/x"
        );
        assert_eq!(
            r("postgres://app:pa55w0rd@db:5432/app"),
            "postgres://app:…[redacted]@db:5432/app"
        );
        assert_eq!(
            r(
                "origin https://x-access-token:ghs_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123@github.com/o/r.git (fetch)"
            ),
            "origin https://x-access-token:ghs_…[redacted]@github.com/o/r.git (fetch)"
        );
        assert_eq!(
            r("ssh://git@github.com:22/o/r"),
            "ssh://git@github.com:22/o/r"
        );
        assert_eq!(
            r("http://localhost:8080/path"),
            "http://localhost:8080/path"
        );
    }

    #[test]
    fn assignments() {
        let cases = [
            ("DB_PASSWORD=hunter2", "DB_PASSWORD=…[redacted]"),
            (
                "export GITHUB_TOKEN=ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123",
                "export GITHUB_TOKEN=ghp_…[redacted]",
            ),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = …[redacted]",
            ),
            (
                "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "AWS_SECRET_ACCESS_KEY=…[redacted]",
            ),
            (
                r#""SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY","#,
                r#""SecretAccessKey": "…[redacted]","#,
            ),
            (
                r#"{"password":"hunter2","user":"bob"}"#,
                r#"{"password":"…[redacted]","user":"bob"}"#,
            ),
            ("password: hunter2", "password: …[redacted]"),
            ("client_secret: 'abc'", "client_secret: '…[redacted]'"),
            (
                "https://x/cb?code=1&access_token=abc.def&x=1",
                "https://x/cb?code=1&access_token=…[redacted]&x=1",
            ),
            ("?token=abc123#frag", "?token=…[redacted]"),
            (
                "Server=db;User Id=sa;Password=Pa55;",
                "Server=db;User Id=sa;Password=…[redacted];",
            ),
            ("token := \"abc\"", "token := \"…[redacted]\""),
            ("X-Api-Key: 0123456789abcdef", "X-Api-Key: …[redacted]"),
            (
                "mysql --password hunter2 -u root",
                "mysql --password …[redacted] -u root",
            ),
            (
                "gh auth --with-token=abc",
                "gh auth --with-token=…[redacted]",
            ),
            ("SECRET=x", "SECRET=…[redacted]"),
        ];
        for (input, want) in cases {
            assert_eq!(r(input), want, "{input}");
        }
    }

    #[test]
    fn tool_credentials() {
        let cases = [
            (
                "machine api.example.com login alice password s3cr3t-Pw",
                "machine api.example.com login alice password …[redacted]",
            ),
            (
                "default login bob password hunter2hunter2",
                "default login bob password …[redacted]",
            ),
            ("  password hunter2", "  password …[redacted]"),
            ("password correcthorsebattery", "password …[redacted]"),
            (
                "db.example.com:5432:app:appuser:Pa55w0rd!",
                "db.example.com:5432:app:appuser:…[redacted]",
            ),
            ("*:*:*:postgres:secret\\:pw", "*:*:*:postgres:…[redacted]"),
            (
                "localhost:5432:*:me:pw\r",
                "localhost:5432:*:me:…[redacted]\r",
            ),
            (
                "mysql -h db -u root -pS3cr3t app",
                "mysql -h db -u root -p…[redacted] app",
            ),
            ("mysql -pS3cr3t", "mysql -p…[redacted]"),
            (
                "mysql -u root --password=S3cr3t app",
                "mysql -u root --password=…[redacted] app",
            ),
            (
                "mysqldump -uroot -p'my pw' app",
                "mysqldump -uroot -p…[redacted] app",
            ),
            (
                "curl -u alice:s3cret https://api.example.com",
                "curl -u alice:…[redacted] https://api.example.com",
            ),
            (
                "curl -s --user alice:s3cret https://x",
                "curl -s --user alice:…[redacted] https://x",
            ),
            (
                "curl -H 'Authorization: Bearer abcdef0123456789abcdef' -u bob:pw1 https://x",
                "curl -H 'Authorization: Bearer …[redacted]' -u bob:…[redacted] https://x",
            ),
            (
                "curl -X POST https://hooks.slack.com/services/T0123ABCD/B0456EFGH/aBcDeFgHiJkLmNoPqRsTuVwX",
                "curl -X POST https://hooks.slack.com/services/…[redacted]",
            ),
            (
                "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4+/abc==;EndpointSuffix=core.windows.net",
                "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=…[redacted];EndpointSuffix=core.windows.net",
            ),
            (
                "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=abc123XYZ=",
                "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=…[redacted]",
            ),
            ("AccountKey=abc123==", "AccountKey=…[redacted]"),
        ];
        for (input, want) in cases {
            assert_eq!(r(input), want, "{input}");
            assert_eq!(r(want), want, "idempotent: {want}");
        }
        // A .netrc file, several lines.
        let netrc = "machine a.example login u1 password pw-one1\nmachine b.example\n  login u2\n  password pw-two2\n";
        let out = r(netrc);
        assert!(
            !out.contains("pw-one1") && !out.contains("pw-two2"),
            "{out}"
        );
        assert!(out.contains("machine b.example\n  login u2\n"), "{out}");
    }

    #[test]
    fn tool_lookalikes_are_left_alone() {
        let keep = [
            "mysql -u root -p app",
            "mysql -u root -p",
            "mysql -P 3306 -h db",
            "mkdir -p src/bin",
            "cp -pr a b",
            "curl -u alice https://x",
            "curl --user-agent x:y https://x",
            "curl https://example.com/a:b",
            "password reset",
            "password is wrong",
            "Your password was changed",
            "the machine password is stored elsewhere",
            "12:30:45 started",
            "fe80::1ff:fe23:4567:890a",
            "00:11:22:33:44:55",
            "src/main.rs:12:5: error: x",
            "https://hooks.slack.com/",
            "AccountName=acme;EndpointSuffix=core.windows.net",
            "AccountKey=${AZURE_KEY}",
        ];
        for s in keep {
            assert_eq!(r(s), s, "false positive");
        }
    }

    #[test]
    fn a_private_key_cut_at_the_top_is_redacted_to_its_end_line() {
        let cut = "$ tail -3 id_rsa\nQ2hZnGxTgGQZzD0MX9pyf3cT8GHlL7xJ0pTAY8eq\nMIIEpAIBAAKCAQEA1c7+9z5Pad7Oe\n-----END RSA PRIVATE KEY-----\n$ ";
        assert_eq!(
            r(cut),
            "$ tail -3 id_rsa\n…[redacted]\n-----END RSA PRIVATE KEY-----\n$ "
        );
    }

    #[test]
    fn private_keys() {
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aumDS\nQ2hZnGxTgGQZzD0MX9pyf3cT8GHlL7xJ0pTAY8eq\n-----END RSA PRIVATE KEY-----";
        assert_eq!(
            r(&format!("before\n{key}\nafter")),
            "before\n-----BEGIN RSA PRIVATE KEY-----\n…[redacted]\n-----END RSA PRIVATE KEY-----\nafter"
        );
        let ssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
        assert!(r(ssh).starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n…[redacted]\n-----END"));
        let pgp = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0AAAAB\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----";
        assert_eq!(
            r(pgp),
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n…[redacted]\n-----END PGP PRIVATE KEY BLOCK-----"
        );
        // Truncated: no END line.
        let cut = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n$ next command";
        assert_eq!(
            r(cut),
            "-----BEGIN PRIVATE KEY-----\n…[redacted]\n$ next command"
        );
        // Public keys and certificates are not secret.
        let public = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----";
        assert_eq!(r(public), public);
    }

    #[test]
    fn several_in_one_text() {
        let text = "A=1\nOPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34\nANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx0123\nHOME=/root";
        let (out, n) = Redactor::new().redact_counted(text);
        assert_eq!(
            out,
            "A=1\nOPENAI_API_KEY=sk-proj-…[redacted]\nANTHROPIC_API_KEY=sk-ant-api03-…[redacted]\nHOME=/root"
        );
        assert_eq!(n, 2);
    }

    #[test]
    fn idempotent() {
        let text = "DB_PASSWORD=hunter2 sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx0123 https://a:b1@h \
                    Authorization: Bearer abcdefghijklmnop1234 \"token\": \"abc\" --password xyz \
                    123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw AKIAIOSFODNN7EXAMPLE \
                    -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49\n-----END EC PRIVATE KEY-----";
        let once = r(text);
        assert_ne!(once, text);
        assert_eq!(r(&once), once);
        assert!(
            matches!(redact(&once), Cow::Borrowed(_)),
            "nothing left to redact"
        );
        assert!(!contains_secret(&once));
    }

    #[test]
    fn leaves_ordinary_output_alone() {
        let keep = [
            "commit 3f786850e387550fdab836ed7e6dc881de23001b",
            "HEAD is now at 3f78685 fix the build",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "id 123e4567-e89b-12d3-a456-426614174000",
            "integrity sha512-Q8QR0YzAyNg3OLrYkAmw5VIdFXxcdE1mWQMgR9fGyXqLZDe3a5bM7JTEpJY1vQmF==",
            "1234567:3f786850e387550fdab836ed7e6dc881de23001b",
            "max_tokens=4096 temperature=0.2",
            "tokenizer = AutoTokenizer.from_pretrained(name)",
            "let token = Token::new(kind);",
            "token = get_token()",
            "password = os.environ[\"DB_PASSWORD\"]",
            "fn password(&self) -> &str {",
            "    token: String,",
            "    api_key: Option<String>,",
            "pub secret: &'a str,",
            "Password: incorrect",
            "Enter password:",
            "invalid token: expired",
            "PWD=/home/user/project",
            "OLDPWD=/tmp",
            "if token == other {",
            "Token::Ident(name) => token => x,",
            "token = None",
            "password = \"\"",
            "password=$DB_PASSWORD",
            "TOKEN=${GITHUB_TOKEN}",
            "api_key: \"{{ vault.key }}\"",
            "token: <your-token-here>",
            "password: ********",
            "The bearer of bad news",
            "Authorization: required",
            "desk-top task-management-application-framework",
            "http://localhost:8080/api",
            "2024-01-01T12:34:56.789Z",
            "fe80::1ff:fe23:4567:890a",
            "println!(\"token: {}\", token);",
            "see sk-learn and risk-assessment-procedure-document-version",
            "node_modules/.bin/eslint --fix src/**/*.ts",
            "a_secret_santa_list.txt",
            "SECRET_KEY_BASE is required",
            "use syn::token::TokenStream2;",
            "let k = secret::Key::from(bytes);",
        ];
        for s in keep {
            assert_eq!(r(s), s, "false positive");
            assert!(!contains_secret(s));
        }
    }

    /// A base64 image (random-looking, long) must pass through.
    #[test]
    fn base64_blobs_survive() {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut x: u64 = 42;
        let mut blob = String::from("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA");
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            blob.push(alphabet[(x >> 58) as usize] as char);
        }
        blob.push_str("==");
        assert_eq!(r(&blob), blob);
        let md = format!("![img]({blob})");
        assert_eq!(r(&md), md);
    }

    #[test]
    fn literal_secrets() {
        let red = Redactor::with_secrets(["my-feishu-app-secret", "s3cr3t-code"]).expect("valid");
        assert_eq!(
            red.redact("secret my-feishu-app-secret and s3cr3t-code!"),
            "secret …[redacted] and …[redacted]!"
        );
        let (out, n) = red.redact_counted("x my-feishu-app-secret DB_PASSWORD=abc");
        assert_eq!(out, "x …[redacted] DB_PASSWORD=…[redacted]");
        assert_eq!(n, 2);
        assert!(matches!(
            Redactor::with_secrets(["short"]),
            Err(RedactError::TooShort { len: 5 })
        ));
        let err = Redactor::with_secrets(["tiny"])
            .err()
            .map(|e| e.to_string());
        assert!(
            err.is_some_and(|e| !e.contains("tiny")),
            "errors never echo the secret"
        );
        assert_eq!(
            Redactor::with_secrets(Vec::<String>::new())
                .map(|r| r.redact("abc").into_owned())
                .ok(),
            Some("abc".into())
        );
        // Special characters are literal.
        let red = Redactor::with_secrets(["a.b*c+d?(e)"]).expect("valid");
        assert_eq!(red.redact("x a.b*c+d?(e) axb"), "x …[redacted] axb");
    }

    #[test]
    fn no_match_borrows() {
        assert!(matches!(
            redact("plain text, nothing here"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(redact(""), Cow::Borrowed(_)));
    }

    #[test]
    fn cjk_and_emoji_around_secrets() {
        assert_eq!(
            r("密钥：sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx0123。😀"),
            "密钥：sk-ant-api03-…[redacted]。😀"
        );
    }

    #[test]
    fn large_input_is_linear_enough() {
        let line = "ordinary log line with a path /usr/lib/x86_64 and hash 3f786850e387550fdab836ed7e6dc881de23001b\n";
        let mut text = line.repeat(20_000); // ~2 MB
        text.push_str("DB_PASSWORD=hunter2\n");
        let start = std::time::Instant::now();
        let out = r(&text);
        assert!(out.ends_with("DB_PASSWORD=…[redacted]\n"));
        // Generous even for an unoptimised test build on a busy machine.
        assert!(start.elapsed().as_secs() < 20, "took {:?}", start.elapsed());
    }
}
