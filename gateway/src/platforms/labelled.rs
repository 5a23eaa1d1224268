//! A machine's name on what its sessions say, when one gateway serves several machines: every
//! text, prompt, caption and status is led by `[MACHINE]`, so the phone knows which box speaks.

use std::borrow::Cow;
use std::sync::Arc;

use crate::platforms::Platform;
use crate::platforms::wrapper::{Said, Wrapper};

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

impl Wrapper for Labelled {
    fn inner(&self) -> &Arc<dyn Platform> {
        &self.inner
    }
    /// The label leads what a person reads first: messages, prompts, summaries, captions,
    /// topic names and statuses (not button labels, file names or a file's own text).
    fn say<'a>(&self, what: Said, text: &'a str) -> Cow<'a, str> {
        match what {
            Said::Message
            | Said::Prompt
            | Said::Summary
            | Said::Caption
            | Said::Topic
            | Said::Status => Cow::Owned(self.on(text)),
            Said::Option | Said::FileName | Said::FileText | Said::ImageName => Cow::Borrowed(text),
        }
    }
    fn max_message(&self) -> usize {
        // Room for the label.
        self.inner
            .max_message()
            .saturating_sub(self.label.len() + 8)
            .max(64)
    }
}
