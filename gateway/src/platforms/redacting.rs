//! Every platform is wrapped in [`Redacting`]: whatever leaves through it (messages, prompts
//! and their button labels, files and their summaries, status messages) is redacted with a
//! [`Redactor`] that also knows the gateway's own credentials (bot tokens, app secrets), so the
//! gateway never echoes them, and the daemon's socket path and the config file's path (a
//! daemon error that names them must not show a chat where the machine keeps its files). The router and the relay redact the full text themselves, with
//! [`Platform::redact`], before they cut, flatten or chunk it; this is the last line.

use std::borrow::Cow;
use std::sync::Arc;

use clibot_gateway::redact::{MIN_LITERAL_LEN, Redactor};

use crate::platforms::Platform;
use crate::platforms::wrapper::{Said, Wrapper};

pub struct Redacting {
    inner: Arc<dyn Platform>,
    redactor: Arc<Redactor>,
}

impl Redacting {
    pub fn new(inner: Arc<dyn Platform>, redactor: Arc<Redactor>) -> Redacting {
        Redacting { inner, redactor }
    }
}

/// The redactor for the gateway's own secrets: each one whole, and a Telegram token's part
/// after the bot id too (the bot id alone is public). Strings too short to be a credential
/// are left out (they would blank out ordinary words).
pub fn redactor<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Redactor {
    let mut list: Vec<&str> = Vec::new();
    for s in secrets {
        list.push(s);
        if let Some((id, rest)) = s.split_once(':')
            && id.bytes().all(|b| b.is_ascii_digit())
        {
            list.push(rest);
        }
    }
    list.retain(|s| s.chars().count() >= MIN_LITERAL_LEN);
    match Redactor::with_secrets(&list) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("clibot-gateway: cannot redact the gateway's own secrets ({e})");
            Redactor::new()
        }
    }
}

impl Wrapper for Redacting {
    fn inner(&self) -> &Arc<dyn Platform> {
        &self.inner
    }
    /// Everything is redacted but a picture's name and a topic's (drawn from redacted text, and
    /// a session's name).
    fn say<'a>(&self, what: Said, text: &'a str) -> Cow<'a, str> {
        match what {
            Said::ImageName | Said::Topic => Cow::Borrowed(text),
            _ => self.redactor.redact(text),
        }
    }
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redactor.redact(text)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;

    #[derive(Default)]
    struct Memory(Mutex<Vec<String>>);

    #[async_trait]
    impl Platform for Memory {
        fn name(&self) -> &str {
            "telegram"
        }
        fn consumer(&self) -> String {
            "memory".into()
        }
        fn max_message(&self) -> usize {
            4096
        }
        async fn send(&self, _chat: &str, text: &str) -> anyhow::Result<()> {
            self.0.lock().expect("lock").push(text.to_string());
            Ok(())
        }
        async fn send_prompt(
            &self,
            _chat: &str,
            _prompt_id: &str,
            text: &str,
            options: &[String],
        ) -> anyhow::Result<Option<String>> {
            let mut said = self.0.lock().expect("lock");
            said.push(text.to_string());
            said.extend(options.iter().cloned());
            Ok(None)
        }
        async fn send_file(
            &self,
            _chat: &str,
            name: &str,
            text: &str,
            summary: &str,
        ) -> anyhow::Result<()> {
            let mut said = self.0.lock().expect("lock");
            said.extend([name.to_string(), text.to_string(), summary.to_string()]);
            Ok(())
        }
    }

    const TG: &str = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ-0123456789";
    const FEISHU: &str = "feishu-app-secret-xyz";

    #[tokio::test]
    async fn the_gateways_own_secrets_never_leave_through_any_method() {
        let memory = Arc::new(Memory::default());
        let red = Arc::new(redactor([TG, FEISHU, "short"]));
        let p = Redacting::new(memory.clone(), red);
        let tg_secret = TG.split_once(':').map(|(_, s)| s).unwrap_or_default();
        p.send("1", &format!("token {TG} and {FEISHU}")).await.ok();
        p.send("1", &format!("just the secret part: {tg_secret}"))
            .await
            .ok();
        p.send_prompt("1", "p", "which?", &[format!("use {FEISHU}"), "no".into()])
            .await
            .ok();
        p.send_file("1", "out.txt", &format!("a\n{FEISHU}\n"), FEISHU)
            .await
            .ok();
        let said = memory.0.lock().expect("lock").join("\n");
        assert!(!said.contains(FEISHU), "{said}");
        assert!(!said.contains(tg_secret), "{said}");
        assert!(
            said.contains("use …[redacted]"),
            "button labels too: {said}"
        );
        // A short string is not a credential: ordinary text keeps it.
        p.send("1", "a short word").await.ok();
        assert!(
            memory
                .0
                .lock()
                .expect("lock")
                .iter()
                .any(|t| t == "a short word")
        );
        assert_eq!(
            Platform::redact(&p, &format!("x {FEISHU}")),
            "x …[redacted]"
        );
    }
}
