//! Telling "cannot reach the platform" from "the platform refused the token": the first is a
//! URL, a network or a proxy to fix, the second a token to replace, and saying one for the
//! other sends people to the wrong fix.

/// Why a request never got an answer, from the words of its error chain: the connection was
/// refused, the name did not resolve, TLS failed, or it timed out.
pub fn network_cause(chain: &str) -> &'static str {
    let t = chain.to_ascii_lowercase();
    if t.contains("dns")
        || t.contains("failed to lookup")
        || t.contains("name or service not known")
    {
        "the host name does not resolve (DNS)"
    } else if t.contains("certificate")
        || t.contains("tls")
        || t.contains("ssl")
        || t.contains("handshake")
        || t.contains("corrupt message")
        || t.contains("invalidcontenttype")
    {
        "the TLS handshake failed (is it https to a plain-HTTP server, or a certificate the system does not trust?)"
    } else if t.contains("connection refused") {
        "the connection was refused (nothing listens there)"
    } else if t.contains("timed out") || t.contains("timeout") {
        "it did not answer in time"
    } else {
        "the connection failed"
    }
}

/// The message for a platform that could not be reached at `url` (`None`: its public API).
pub fn unreachable(platform: &str, url: Option<&str>, default_url: &str, chain: &str) -> String {
    let url = url.unwrap_or(default_url);
    format!(
        "cannot reach {platform} at {url}: {} ({chain}); check the network, a proxy, or the api_url setting",
        network_cause(chain)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_named() {
        assert!(
            network_cause("error sending request: dns error: failed to lookup address")
                .contains("DNS")
        );
        assert!(
            network_cause("tcp connect error: Connection refused (os error 111)")
                .contains("refused")
        );
        assert!(network_cause("invalid peer certificate: UnknownIssuer").contains("TLS"));
        assert!(network_cause("operation timed out").contains("in time"));
        assert!(
            network_cause("received corrupt message of type InvalidContentType").contains("TLS")
        );
        let m = unreachable(
            "Telegram",
            None,
            "https://api.telegram.org",
            "Connection refused",
        );
        assert!(
            m.starts_with(
                "cannot reach Telegram at https://api.telegram.org: the connection was refused"
            ),
            "{m}"
        );
    }
}
