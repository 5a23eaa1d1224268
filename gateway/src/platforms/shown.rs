//! Buttons carry their prompt's id ([`button_data`]), so that pressing one answers the prompt
//! the user read, not whatever the session happens to wait on by the time the press arrives.
//! (For typed answers the daemon keeps the prompt each chat was last shown, with its binding.)

/// A button's data: `a:<prompt id>:<option number>` (well under Telegram's 64 bytes).
pub fn button_data(prompt_id: &str, option: usize) -> String {
    format!("a:{prompt_id}:{option}")
}

/// The prompt id and option number a button carries.
pub fn parse_button(data: &str) -> Option<(String, String)> {
    let rest = data.strip_prefix("a:")?;
    let (id, n) = rest.split_once(':')?;
    (!id.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| (id.to_string(), n.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_round_trip_and_junk_is_refused() {
        let d = button_data("0123456789abcdef", 3);
        assert!(d.len() <= 64);
        assert_eq!(
            parse_button(&d),
            Some(("0123456789abcdef".into(), "3".into()))
        );
        for bad in ["answer:1", "a:", "a::1", "a:id:", "a:id:x", "a:id", ""] {
            assert_eq!(parse_button(bad), None, "{bad}");
        }
    }
}
