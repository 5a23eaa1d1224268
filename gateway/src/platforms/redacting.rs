//! Every platform is wrapped in [`Redacting`]: whatever leaves through it (messages, prompts
//! and their button labels, files and their summaries, status messages) is redacted with a
//! [`Redactor`] that also knows the gateway's own credentials (bot tokens, app secrets), so the
//! gateway never echoes them, and the daemon's socket path and the config file's path (a
//! daemon error that names them must not show a chat where the machine keeps its files). The router and the relay redact the full text themselves, with
//! [`Platform::redact`], before they cut, flatten or chunk it; this is the last line.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use clibot_gateway::redact::{MIN_LITERAL_LEN, Redactor};

use crate::platforms::Platform;

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

#[async_trait]
impl Platform for Redacting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn consumer(&self) -> String {
        self.inner.consumer()
    }
    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
    fn max_message(&self) -> usize {
        self.inner.max_message()
    }
    fn max_file(&self) -> usize {
        self.inner.max_file()
    }
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redactor.redact(text)
    }
    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        self.inner.send(chat, &self.redact(text)).await
    }
    async fn delete_message(&self, chat: &str, message: &str) -> anyhow::Result<bool> {
        self.inner.delete_message(chat, message).await
    }
    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        let options: Vec<String> = options
            .iter()
            .map(|o| self.redact(o).into_owned())
            .collect();
        self.inner
            .send_prompt(chat, prompt_id, &self.redact(text), &options)
            .await
    }
    async fn remove_buttons(&self, chat: &str, message: &str) -> anyhow::Result<()> {
        self.inner.remove_buttons(chat, message).await
    }
    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        let name = self.redact(name);
        let summary = self.redact(summary);
        self.inner
            .send_file(chat, &name, &self.redact(text), &summary)
            .await
    }
    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        // Sent unchanged: what may hold a secret was refused or redacted before.
        let (name, caption) = (self.redact(name), self.redact(caption));
        self.inner.send_bytes(chat, &name, data, &caption).await
    }
    async fn download(
        &self,
        file: &crate::platforms::Attachment,
        max: u64,
    ) -> anyhow::Result<Vec<u8>> {
        self.inner.download(file, max).await
    }
    async fn send_image(
        &self,
        chat: &str,
        name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        // The picture's text was redacted before it was drawn.
        let caption = self.redact(caption);
        self.inner.send_image(chat, name, png, &caption).await
    }
    async fn typing(&self, chat: &str) {
        self.inner.typing(chat).await
    }
    fn topics(&self) -> bool {
        self.inner.topics()
    }
    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        self.inner.open_topic(chat, name).await
    }
    async fn reopen_topic(&self, chat: &str) {
        self.inner.reopen_topic(chat).await
    }
    async fn close_topic(&self, chat: &str) {
        self.inner.close_topic(chat).await
    }
    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        self.inner.status(chat, id, &self.redact(text)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

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
        assert_eq!(p.redact(&format!("x {FEISHU}")), "x …[redacted]");
    }
}
