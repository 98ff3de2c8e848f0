//! How Chromium will read a URL that a raw CDP call hands it (SPEC §14): whether loading it may
//! read a local file, open a page with browser privileges, or neither.
//!
//! Chromium parses a URL by the WHATWG URL standard before it decides what to load: C0 controls
//! and spaces at either end are stripped, ASCII tab, CR and LF are removed anywhere, and the
//! scheme is case-folded, so `"\u{1}FI\tLE:///etc/passwd"` is `file:///etc/passwd`. [`judge`]
//! reads a URL the same way (the `url` crate follows the standard) and decides by its scheme,
//! unwrapping `view-source:` and `blob:` (which show or serve what their inner URL names):
//!
//! * `file:` and `filesystem:` are [`Verdict::Local`];
//! * a one-letter scheme (`c:/…`) is local too: Chromium on Windows reads a drive letter as a
//!   local path (`url/url_util.cc`), and so is a string with no scheme at all (`/etc/passwd`,
//!   `c|/…`, `\\host\share`, `fil%65:…`, `blob:null/…`): no web page is spelled that way, and a
//!   path may be read as a file (Chromium 156 on Linux refuses or opens an empty tab);
//! * the DevTools frontend and the browser's own pages (`devtools:`, `chrome:` …) are
//!   [`Verdict::Privileged`]: measured on Chromium 156, a tab navigated to
//!   `devtools://devtools/bundled/devtools_app.html` gets the real DevTools host bindings and
//!   reads any local file through `InspectorFrontendHost.loadNetworkResource`, and
//!   `chrome://inspect` opens a DevTools window with one click;
//! * everything else (`http:`, `https:`, `about:`, `data:`, `javascript:`, …) is [`Verdict::Web`].
//!
//! When the `url` crate cannot parse a string but the text before its first `:` is a valid
//! scheme, that scheme decides: Chromium extracts the scheme the same way, so an `http:` string
//! that is not a valid URL is refused or loaded by Chromium as a web URL, never as a file.

use std::borrow::Cow;

use url::Url;

/// What loading a URL would do, as far as the security policy cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing local: a web page, `about:blank`, a `data:` or `javascript:` URL.
    Web,
    /// It may read a local file; the text says why.
    Local(&'static str),
    /// A page with browser privileges (the DevTools frontend, the browser's own pages): its
    /// scheme.
    Privileged(String),
}

/// Schemes of pages with browser privileges: the DevTools frontend, Chromium's own WebUI and
/// the names other Chromium-based browsers give it.
const PRIVILEGED: &[&str] = &[
    "devtools",
    "chrome-devtools",
    "chrome",
    "chrome-untrusted",
    "chrome-search",
    "edge",
    "brave",
    "opera",
    "vivaldi",
];

/// `view-source:`/`blob:` layers unwrapped before the URL counts as too deeply nested to check
/// (Chromium itself shows `view-source:view-source:…` as `about:blank`).
const MAX_UNWRAP: usize = 8;

const FILE: &str = "is a file: URL";
const FILESYSTEM: &str = "is a filesystem: URL";
const DRIVE: &str = "starts with a drive letter, which Chromium on Windows loads as a local path";
const NO_SCHEME: &str = "has no URL scheme; Chromium might read it as a local path";
const TOO_DEEP: &str = "nests view-source:/blob: too deeply to be checked";

/// Judges `url` as Chromium will parse it (see the module docs).
pub(crate) fn judge(url: &str) -> Verdict {
    let cleaned = remove_tab_newline(url);
    let mut s = trim_c0_space(&cleaned);
    for _ in 0..=MAX_UNWRAP {
        if s.is_empty() {
            // Chromium opens `about:blank` for an empty URL.
            return Verdict::Web;
        }
        let scheme = match Url::parse(s) {
            Ok(u) => Some(u.scheme().to_string()),
            Err(_) => scheme_of(s),
        };
        let Some(scheme) = scheme else {
            return Verdict::Local(NO_SCHEME);
        };
        match scheme.as_str() {
            "file" => return Verdict::Local(FILE),
            "filesystem" => return Verdict::Local(FILESYSTEM),
            one if one.len() == 1 => return Verdict::Local(DRIVE),
            // The scheme is `s`'s first bytes (ASCII), then a colon.
            "view-source" | "blob" => s = trim_c0_space(s.get(scheme.len() + 1..).unwrap_or("")),
            p if PRIVILEGED.contains(&p) => return Verdict::Privileged(scheme),
            _ => return Verdict::Web,
        }
    }
    Verdict::Local(TOO_DEEP)
}

/// The scheme of `s` by the WHATWG scheme state (an ASCII letter, then letters, digits, `+`, `-`
/// or `.`, up to the first `:`), lower-cased; `None` when `s` does not start with one.
/// `s` has been cleaned (no tab/newline, no C0/space at the start).
fn scheme_of(s: &str) -> Option<String> {
    let name = &s[..s.find(':')?];
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then(|| name.to_ascii_lowercase())
}

/// WHATWG "remove all ASCII tab or newline from input".
fn remove_tab_newline(s: &str) -> Cow<'_, str> {
    const TAB_NEWLINE: [char; 3] = ['\t', '\n', '\r'];
    if s.contains(TAB_NEWLINE) {
        Cow::Owned(s.chars().filter(|c| !TAB_NEWLINE.contains(c)).collect())
    } else {
        Cow::Borrowed(s)
    }
}

/// WHATWG "remove any leading and trailing C0 control or space".
fn trim_c0_space(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SECRET: &str = "/tmp/secret.txt";

    fn local(url: &str) -> bool {
        matches!(judge(url), Verdict::Local(_))
    }

    #[test]
    fn the_spellings_chromium_normalises_are_local() {
        // The list (each loads the file on Chromium 156), and more measured there.
        for prefix in [
            "file:",
            "\u{1}file:",
            "\u{1f}file:",
            "fi\tle:",
            "f\nile:",
            "file\r:",
            "view-source: file:",
            "view-\tsource:file:",
            "view-source:fi\nle:",
            "FILE:",
            " file:",
            "View-Source:FILE:",
            "view-source:  file:",
            "view-source:view-source:file:",
            "view-source:\u{1}file:",
            "blob:file:",
            "\u{0}\u{1f} \tf\ri\nL\te:",
        ] {
            for rest in ["//", "", "//localhost", "///"] {
                let url = format!("{prefix}{rest}{SECRET}");
                assert!(local(&url), "{url:?} is local: {:?}", judge(&url));
            }
        }
        for url in [
            "file:///tmp/secret.txt \u{0}",
            "file:\\\\/tmp/secret.txt",
            "file://127.0.0.1/tmp/%73ecret.txt",
            "filesystem:file:///temporary/x",
            "filesystem:http://127.0.0.1:8000/temporary/x",
            "FileSystem:http://a.test/persistent/x",
            "blob:null/0b1c2d3e-aaaa-bbbb-cccc-000000000000",
            "blob:blob:file:///x",
        ] {
            assert!(local(url), "{url:?} is local: {:?}", judge(url));
        }
    }

    #[test]
    fn what_cannot_be_read_as_a_web_url_is_local() {
        for url in [
            "/etc/passwd",
            "etc/passwd",
            "~/secret",
            "~",
            "c:/Users/x/secret.txt",
            "C:\\Users\\x\\secret.txt",
            "C|/Users/x",
            "\\\\host\\share\\x",
            "//host/share/x",
            "file%3A///etc/passwd",
            "fil%65:///etc/passwd",
            "%66ile:///etc/passwd",
            "file\u{0}:///etc/passwd",
            "\u{a0}file:///etc/passwd",
            "\u{feff}file:///etc/passwd",
            "ｆile:///etc/passwd",
            "1http://a.test/",
            "view-source:%01file:///etc/passwd",
        ] {
            assert!(local(url), "{url:?} is local: {:?}", judge(url));
        }
        let deep = format!("{}http://a.test/", "view-source:".repeat(MAX_UNWRAP + 1));
        assert_eq!(judge(&deep), Verdict::Local(TOO_DEEP));
        let ok = format!("{}http://a.test/", "view-source:".repeat(MAX_UNWRAP));
        assert_eq!(judge(&ok), Verdict::Web);
    }

    #[test]
    fn devtools_and_browser_pages_are_privileged() {
        for (url, scheme) in [
            ("devtools://devtools/bundled/devtools_app.html", "devtools"),
            ("DEVTOOLS:/devtools/bundled/devtools_app.html", "devtools"),
            ("\u{1}devtools:devtools/bundled/inspector.html", "devtools"),
            ("chrome://inspect", "chrome"),
            ("chrome:inspect", "chrome"),
            ("view-source:chrome://version", "chrome"),
            ("chrome-untrusted://x/", "chrome-untrusted"),
            ("edge://inspect", "edge"),
        ] {
            assert_eq!(judge(url), Verdict::Privileged(scheme.into()), "{url:?}");
        }
    }

    #[test]
    fn ordinary_urls_are_web() {
        for url in [
            "",
            "   ",
            "http://127.0.0.1:8000/page?x=file:///etc/passwd#file:",
            "https://example.com/",
            "HTTPS://EXAMPLE.COM",
            " \thttp://a.test/\n",
            "about:blank",
            "about:srcdoc",
            "data:text/html,<a href=file:///etc/passwd>x</a>",
            "javascript:location='file:///etc/passwd'",
            "view-source:http://a.test/",
            "view-source:view-source:https://a.test/",
            "blob:http://a.test/0b1c2d3e-aaaa-bbbb-cccc-000000000000",
            "ws://a.test/",
            "chrome-extension://abcdefghijklmnopabcdefghijklmnop/page.html",
            "mailto:someone@example.com",
            // Not a valid URL (a space in the host), but an http: one whatever Chromium does.
            "http://exa mple.com/",
        ] {
            assert_eq!(judge(url), Verdict::Web, "{url:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2_000, failure_persistence: None, ..ProptestConfig::default()
        })]

        /// Our scheme extraction (used when the `url` crate cannot parse) agrees with the crate
        /// whenever the crate can.
        #[test]
        fn scheme_of_agrees_with_the_url_crate(s in "[a-zA-Z0-9+.%|:/\\\\-]{0,12}:[ -~]{0,12}") {
            let cleaned = remove_tab_newline(&s);
            let s = trim_c0_space(&cleaned);
            if let Ok(u) = Url::parse(s) {
                let ours = scheme_of(s);
                prop_assert_eq!(ours.as_deref(), Some(u.scheme()));
            }
        }

        /// No input panics, and a long one is judged in linear time (no unwrap is quadratic).
        #[test]
        fn any_input_is_judged(s in any::<String>()) {
            let _ = judge(&s);
        }
    }

    #[test]
    fn a_huge_nested_url_is_judged() {
        let huge = "view-source:".repeat(1 << 20);
        assert_eq!(judge(&huge), Verdict::Local(TOO_DEEP));
    }
}
