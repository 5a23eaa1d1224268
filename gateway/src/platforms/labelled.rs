//! A machine's name on what its sessions say, when one gateway serves several machines: every
//! text, prompt, caption and status is led by `[MACHINE]`, so the phone knows which box speaks.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;

use crate::platforms::{Attachment, Platform};

pub struct Labelled {
    inner: Arc<dyn Platform>,
    label: String,
}

impl Labelled {
    pub fn new(inner: Arc<dyn Platform>, machine: &str) -> Labelled {
        Labelled {
            inner,
            label: format!("[{machine}] "),
        }
    }

    fn on(&self, text: &str) -> String {
        format!("{}{text}", self.label)
    }
}

#[async_trait]
impl Platform for Labelled {
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
        // Room for the label.
        self.inner
            .max_message()
            .saturating_sub(self.label.len() + 8)
            .max(64)
    }
    fn max_file(&self) -> usize {
        self.inner.max_file()
    }
    fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.inner.redact(text)
    }
    async fn send(&self, chat: &str, text: &str) -> anyhow::Result<()> {
        self.inner.send(chat, &self.on(text)).await
    }
    async fn send_prompt(
        &self,
        chat: &str,
        prompt_id: &str,
        text: &str,
        options: &[String],
    ) -> anyhow::Result<Option<String>> {
        self.inner
            .send_prompt(chat, prompt_id, &self.on(text), options)
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
        self.inner
            .send_file(chat, name, text, &self.on(summary))
            .await
    }
    async fn send_image(
        &self,
        chat: &str,
        name: &str,
        png: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.inner
            .send_image(chat, name, png, &self.on(caption))
            .await
    }
    async fn send_bytes(
        &self,
        chat: &str,
        name: &str,
        data: &[u8],
        caption: &str,
    ) -> anyhow::Result<()> {
        self.inner
            .send_bytes(chat, name, data, &self.on(caption))
            .await
    }
    async fn download(&self, file: &Attachment, max: u64) -> anyhow::Result<Vec<u8>> {
        self.inner.download(file, max).await
    }
    async fn delete_message(&self, chat: &str, message: &str) -> anyhow::Result<bool> {
        self.inner.delete_message(chat, message).await
    }
    fn topics(&self) -> bool {
        self.inner.topics()
    }
    async fn open_topic(&self, chat: &str, name: &str) -> anyhow::Result<String> {
        self.inner.open_topic(chat, &self.on(name)).await
    }
    async fn reopen_topic(&self, chat: &str) {
        self.inner.reopen_topic(chat).await
    }
    async fn close_topic(&self, chat: &str) {
        self.inner.close_topic(chat).await
    }
    async fn typing(&self, chat: &str) {
        self.inner.typing(chat).await
    }
    async fn status(&self, chat: &str, id: Option<&str>, text: &str) -> Option<String> {
        self.inner.status(chat, id, &self.on(text)).await
    }
}
