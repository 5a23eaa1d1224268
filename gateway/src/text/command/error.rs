//! Why a message that starts with the prefix is not a valid command, in words sent back to
//! the chat as they are: the usage line, the commands there are, a suggestion.

use std::fmt;

use super::CommandName;

/// Why a message that starts with the prefix is not a valid command. The `Display` text
/// is meant to be sent back to the chat as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// Only the prefix.
    Empty {
        /// The configured prefix.
        prefix: String,
    },
    /// A command word that does not exist.
    Unknown {
        /// The configured prefix.
        prefix: String,
        /// The word as typed.
        word: String,
        /// A close command, if there is one.
        suggestion: Option<CommandName>,
    },
    /// A required argument is missing.
    MissingArgument {
        /// The configured prefix.
        prefix: String,
        /// The command.
        command: CommandName,
        /// What is missing (`NAME`, `CLI`, …).
        what: &'static str,
    },
    /// More arguments than the command takes.
    TooManyArguments {
        /// The configured prefix.
        prefix: String,
        /// The command.
        command: CommandName,
        /// The first unexpected argument.
        extra: String,
    },
    /// An argument with a bad value.
    InvalidArgument {
        /// The configured prefix.
        prefix: String,
        /// The command.
        command: CommandName,
        /// Which argument (`NAME`, `N`, …).
        what: &'static str,
        /// The value as typed.
        value: String,
        /// What it must look like.
        expected: String,
    },
    /// Arguments that do not fit together, said in words (`job add`'s fields).
    Fields {
        prefix: String,
        command: CommandName,
        message: String,
    },
}

impl CommandError {
    /// The command this error is about, if it got that far.
    pub fn command(&self) -> Option<CommandName> {
        match self {
            CommandError::Empty { .. } | CommandError::Unknown { .. } => None,
            CommandError::MissingArgument { command, .. }
            | CommandError::TooManyArguments { command, .. }
            | CommandError::InvalidArgument { command, .. }
            | CommandError::Fields { command, .. } => Some(*command),
        }
    }
}

pub(super) fn command_list() -> String {
    CommandName::ALL.map(CommandName::as_str).join(", ")
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Empty { prefix } => write!(
                f,
                "{prefix} needs a command: {}. To send {prefix} itself to the CLI, type it twice.",
                command_list()
            ),
            CommandError::Unknown {
                prefix,
                word,
                suggestion,
            } => {
                write!(f, "unknown command {prefix}{word}")?;
                if let Some(s) = suggestion {
                    write!(f, " (did you mean {prefix}{s}?)")?;
                }
                write!(f, "; commands: {}", command_list())
            }
            CommandError::MissingArgument {
                prefix,
                command,
                what,
            } => write!(
                f,
                "{prefix}{command} needs {what}; usage: {}",
                command.usage(prefix)
            ),
            CommandError::TooManyArguments {
                prefix,
                command,
                extra,
            } => {
                if command.args().is_empty() {
                    write!(
                        f,
                        "{prefix}{command} takes no arguments (got {extra:?}); usage: "
                    )?;
                } else {
                    write!(
                        f,
                        "too many arguments for {prefix}{command} (from {extra:?}); usage: "
                    )?;
                }
                f.write_str(&command.usage(prefix))
            }
            CommandError::InvalidArgument {
                prefix,
                command,
                what,
                value,
                expected,
            } => write!(
                f,
                "{prefix}{command}: {what} {value:?} is not valid, it must be {expected}; usage: {}",
                command.usage(prefix)
            ),
            CommandError::Fields {
                prefix,
                command,
                message,
            } => write!(f, "{prefix}{command} add: {message}"),
        }
    }
}

impl std::error::Error for CommandError {}
