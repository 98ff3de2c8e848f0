//! Credential redaction for CDP URLs (SPEC §14).
//!
//! A CDP URL may carry `user:password@` or query values such as `?token=`, `apiKey=` or
//! `signature=`. None of them may reach a log line, an error, a snapshot or a tool result.
//! [`redact_url`] replaces every such part with `***`; [`Secrets`] scrubs the same values out of
//! free text that a lower layer (an I/O or TLS error) might have built from the URL.

use url::Url;

const MASK: &str = "***";

/// Returns `raw` with the user name, password and every query value replaced by `***`.
///
/// Unparseable input is redacted conservatively: everything after the scheme's `//` up to the
/// last `@`, and everything after the first `?`, is masked.
pub fn redact_url(raw: &str) -> String {
    match Url::parse(raw) {
        Ok(mut url) if url.has_host() => {
            if !url.username().is_empty() {
                let _ = url.set_username(MASK);
            }
            if url.password().is_some() {
                let _ = url.set_password(Some(MASK));
            }
            if url.query().is_some() {
                let pairs: Vec<String> = url
                    .query_pairs()
                    .map(|(k, _)| format!("{k}={MASK}"))
                    .collect();
                url.set_query(Some(&pairs.join("&")));
            }
            if url.fragment().is_some() {
                url.set_fragment(Some(MASK));
            }
            url.to_string()
        }
        _ => redact_unparsed(raw),
    }
}

fn redact_unparsed(raw: &str) -> String {
    let start = raw.find("//").map(|i| i + 2).unwrap_or(0);
    // Userinfo first: a password may itself contain '?', '#' or '/'; everything up to the last
    // '@' after the scheme is treated as credentials.
    let (mut out, rest_from) = match raw[start..].rfind('@') {
        Some(at) => (format!("{}{MASK}@", &raw[..start]), start + at + 1),
        None => (raw[..start].to_string(), start),
    };
    let rest = &raw[rest_from..];
    match rest.find(['?', '#']) {
        Some(q) => {
            out.push_str(&rest[..=q]);
            out.push_str(MASK);
        }
        None => out.push_str(rest),
    }
    out
}

/// The secret parts of one URL, for scrubbing free text.
#[derive(Clone, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} hidden)", self.values.len())
    }
}

impl Secrets {
    /// Collects the user name, password and query values of `raw` (raw and percent-decoded).
    pub fn of(raw: &str) -> Secrets {
        let mut values = Vec::new();
        if let Ok(url) = Url::parse(raw) {
            values.push(url.username().to_string());
            if let Some(p) = url.password() {
                values.push(p.to_string());
            }
            for (_, v) in url.query_pairs() {
                values.push(v.into_owned());
            }
            if let Some(q) = url.query() {
                for part in q.split('&') {
                    if let Some((_, v)) = part.split_once('=') {
                        values.push(v.to_string());
                    }
                }
            }
            if let Some(f) = url.fragment() {
                values.push(f.to_string());
            }
        }
        values.retain(|v| v.len() >= 3);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Secrets { values }
    }

    /// True when `text` holds one of the secret values.
    pub fn found_in(&self, text: &str) -> bool {
        self.values.iter().any(|v| text.contains(v.as_str()))
    }

    /// Replaces every secret value in `text` by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_password_and_query_values_are_masked() {
        let r = redact_url("wss://user:pw@example.com:9222/devtools?token=S3CR3T&apiKey=abc#frag");
        assert!(!r.contains("S3CR3T") && !r.contains("user") && !r.contains("pw@"));
        assert!(!r.contains("abc"), "{r}");
        assert!(r.contains("example.com:9222/devtools"), "{r}");
        assert!(r.contains("token=***"), "{r}");
    }

    #[test]
    fn plain_url_is_unchanged() {
        assert_eq!(
            redact_url("ws://127.0.0.1:9222/devtools/browser/abc"),
            "ws://127.0.0.1:9222/devtools/browser/abc"
        );
    }

    #[test]
    fn unparseable_url_is_masked_conservatively() {
        for raw in [
            "ws//user:S3CR3T@host?token=S3CR3T",
            "ws://user:pw-S3CR3T?x@127.0.0.1:9/devtools",
            "ws://user:pw-S3CR3T#x@127.0.0.1:9/devtools?token=S3CR3T",
            "ws://user:pw/S3CR3T@h:99999/x",
        ] {
            let r = redact_url(raw);
            assert!(!r.contains("S3CR3T") && !r.contains("user"), "{raw} -> {r}");
        }
    }

    #[test]
    fn scrub_removes_secrets_from_free_text() {
        let s = Secrets::of("wss://user:pw-secret@h/x?token=S3CR3T");
        let t = s.scrub("failed GET wss://user:pw-secret@h/x?token=S3CR3T: refused");
        assert!(!t.contains("S3CR3T") && !t.contains("pw-secret"), "{t}");
    }
}
