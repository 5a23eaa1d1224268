//! An error and its causes as one line for people. `anyhow`'s `{:#}` joins every cause with
//! `": "`, but most of our errors already name their cause in their own message (`cannot read
//! config file X: No such file or directory`), which then came out twice. A cause already said
//! is left out here.

use std::error::Error;

/// `err: cause: cause`, each cause once.
pub fn describe(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error, bool);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            if self.1 {
                write!(f, "cannot read x: {}", self.0)
            } else {
                write!(f, "cannot read x")
            }
        }
    }

    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_is_said_once() {
        let io = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let said = describe(&Outer(io(), true));
        assert_eq!(said.matches("not found").count(), 1, "{said}");
        let said = describe(&Outer(io(), false));
        assert_eq!(said, "cannot read x: entity not found");
    }
}
