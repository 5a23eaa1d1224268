//! One forwarding for every platform wrapper ([`super::labelled::Labelled`],
//! [`super::redacting::Redacting`]): a wrapper says only how it changes what a chat reads
//! ([`Wrapper::say`]), and this blanket implementation forwards every [`Platform`] method to
//! the wrapped platform, passing each text through it. A method added to `Platform` is
//! forwarded here once — no wrapper can forget one (a forgotten `send_prompt` used to fall back
//! to the trait's default and silently drop a prompt's buttons).

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;

use super::{Attachment, Platform};

/// Which text of a call a wrapper is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// A message (`send`).
    Message,
    /// A prompt's text.
    Prompt,
    /// One of a prompt's options (a button's label).
    Option,
    /// A file's name (`send_file`, `send_bytes`).
    FileName,
    /// The text of a file sent as text.
    FileText,
    /// The short text that goes with a file sent as text.
    Summary,
    /// A picture's or a file's caption.
    Caption,
    /// A picture's file name (drawn from redacted text).
    ImageName,
    /// A topic's name.
    Topic,
    /// A running turn's status message.
    Status,
}

/// A platform seen through a change to what it says.
pub trait Wrapper: Send + Sync + 'static {
    /// The platform wrapped.
    fn inner(&self) -> &Arc<dyn Platform>;
    /// What the chat reads instead of `text`.
    fn say<'a>(&self, what: Said, text: &'a str) -> Cow<'a, str>;
    /// The longest message (the wrapped platform's, less what `say` adds).
    fn max_message(&self) -> usize {
        self.inner().max_message()
    }
    /// See [`Platform::redact`].
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.inner().redact(text)
    }
}

#[async_trait]
impl<W: Wrapper> Platform for W {
    fn name(&self) -> &str {
        self.inner().name()
    }
    fn consumer(&self) -> String {
        self.inner().consumer()
    }
    fn is_local(&self) -> bool {
        self.inner().is_local()
    }
    fn max_message(&self) -> usize {
        Wrapper::max_message(self)
    }
    fn max_file(&self) -> usize {
        self.inner().max_file()
    }
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Wrapper::redact(self, text)
    }
    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        self.inner()
            .send(chat, &self.say(Said::Message, text))
            .await
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
            .map(|o| self.say(Said::Option, o).into_owned())
            .collect();
        self.inner()
            .send_prompt(chat, prompt_id, &self.say(Said::Prompt, text), &options)
            .await
    }
    async fn remove_buttons(&self, chat: &str, message: &str) -> anyhow::Result<()> {
        self.inner().remove_buttons(chat, message).await
    }
    async fn edit_prompt(
        &self,
        chat: &str,
        message: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<()> {
        let options: Vec<String> = options
            .iter()
            .map(|o| self.say(Said::Option, o).into_owned())
            .collect();
        let text = self.say(Said::Prompt, text);
        self.inner()
            .edit_prompt(chat, message, prompt_id, &text, &options)
            .await
    }
    async fn pin(&self, chat: &str, message: &str, on: bool) -> anyhow::Result<()> {
        self.inner().pin(chat, message, on).await
    }
    async fn send_file(
        &self,
        chat: &str,
        name: &str,
        text: &str,
        summary: &str,
    ) -> anyhow::Result<()> {
        let (name, text) = (
            self.say(Said::FileName, name),
            self.say(Said::FileText, text),
        );
        let summary = self.say(Said::Summary, summary);
        self.inner().send_file(chat, &name, &text, &summary).await
    }
    async fn send_image(
        &self,
        chat: &str,
        name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        let (name, caption) = (
            self.say(Said::ImageName, name),
            self.say(Said::Caption, caption),
        );
        self.inner().send_image(chat, &name, png, &caption).await
    }
    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        // The bytes go unchanged: what may hold a secret was refused or redacted before.
        let (name, caption) = (
            self.say(Said::FileName, name),
            self.say(Said::Caption, caption),
        );
        self.inner().send_bytes(chat, &name, data, &caption).await
    }
    async fn download(&self, file: &Attachment, max: u64) -> anyhow::Result<Vec<u8>> {
        self.inner().download(file, max).await
    }
    async fn delete_message(&self, chat: &str, message: &str) -> anyhow::Result<bool> {
        self.inner().delete_message(chat, message).await
    }
    fn topics(&self) -> bool {
        self.inner().topics()
    }
    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        self.inner()
            .open_topic(chat, &self.say(Said::Topic, name))
            .await
    }
    async fn reopen_topic(&self, chat: &str) {
        self.inner().reopen_topic(chat).await
    }
    async fn close_topic(&self, chat: &str) {
        self.inner().close_topic(chat).await
    }
    async fn typing(&self, chat: &str) {
        self.inner().typing(chat).await
    }
    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        self.inner()
            .status(chat, id, &self.say(Said::Status, text))
            .await
    }
}

#[cfg(test)]
mod tests {
    /// The methods an `impl` or `trait` block named `header` declares, read from `source`.
    fn methods(source: &str, header: &str) -> Vec<String> {
        let Some(start) = source.find(header) else {
            panic!("{header:?} not found");
        };
        let body = &source[start..];
        let end = body.find("\n}\n").unwrap_or(body.len());
        let mut names: Vec<String> = body[..end]
            .lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let l = l.strip_prefix("async ").unwrap_or(l);
                l.strip_prefix("fn ")?
                    .split(['(', '<'])
                    .next()
                    .map(str::to_string)
            })
            .collect();
        names.sort();
        names
    }

    /// This forwarding, and the one wrapper that changes more than text (`Egress`, which
    /// queues sends), forward every method of `Platform`: none falls back to a default.
    #[test]
    fn every_platform_method_is_forwarded() {
        let all = methods(include_str!("mod.rs"), "pub trait Platform");
        assert!(all.len() > 15, "{all:?}");
        let here = methods(
            include_str!("wrapper.rs"),
            "impl<W: Wrapper> Platform for W",
        );
        assert_eq!(here, all, "the blanket forwarding");
        let egress = methods(
            include_str!("../outbound/egress.rs"),
            "impl Platform for Egress",
        );
        assert_eq!(egress, all, "Egress");
    }
}
