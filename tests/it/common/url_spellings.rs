//! Generated spellings of URLs for the security policy's tests (SPEC §14), by class: every way
//! the WHATWG URL parser, and so Chromium, normalises a URL (C0 controls and spaces at the ends,
//! tab/CR/LF anywhere, the scheme's case), percent-encoding, and nesting in `view-source:` and
//! `blob:`. `security_policy` feeds 12,000 of them through the policy; `e2e_security` sends a
//! deterministic sample of every class to Chromium to learn which ones it loads as files.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// What a spelling names, and so what the default policy must do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `file:` URLs of the file.
    File,
    /// `filesystem:` URLs.
    Filesystem,
    /// A local URL inside one to three `view-source:` layers.
    ViewSource,
    /// A `blob:` URL whose origin is a file (or opaque: `blob:null/…`, what a `file:` page makes).
    Blob,
    /// `file` with a percent-encoded letter or colon (Chromium: not a valid URL).
    PercentScheme,
    /// A path, a Windows drive or UNC path: no scheme Chromium could load on the web.
    NoScheme,
    /// The DevTools frontend or the browser's own pages, maybe inside `view-source:`.
    Privileged,
    /// An ordinary web URL (the test server's page, `about:blank`, `data:`), however spelled.
    Web,
}

/// Every class, in the order the sample takes them.
pub const CLASSES: [Class; 8] = [
    Class::File,
    Class::Filesystem,
    Class::ViewSource,
    Class::Blob,
    Class::PercentScheme,
    Class::NoScheme,
    Class::Privileged,
    Class::Web,
];

impl Class {
    /// The option that refuses this class under the default `[security]`; `None`: allowed.
    pub fn refused_by(self) -> Option<&'static str> {
        match self {
            Class::Privileged => Some("security.allow_page_protocol"),
            Class::Web => None,
            _ => Some("security.allow_file_urls"),
        }
    }
}

/// One generated spelling.
#[derive(Debug, Clone)]
pub struct Spelling {
    /// Its class.
    pub class: Class,
    /// The URL as sent.
    pub text: String,
}

/// C0 controls and spaces, which Chromium strips at either end.
fn edge() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![Just(' '), (0u8..0x20).prop_map(char::from)],
        0..3,
    )
    .prop_map(String::from_iter)
}

/// `word` in any case, with up to three tabs, CRs or LFs anywhere (Chromium removes them).
fn scramble(word: &'static str) -> impl Strategy<Value = String> {
    let n = word.len();
    (
        prop::collection::vec(any::<bool>(), n),
        prop::collection::vec((0..=n, select(vec!['\t', '\n', '\r'])), 0..3),
    )
        .prop_map(move |(upper, mut inserts)| {
            let mut chars: Vec<char> = word
                .chars()
                .zip(upper)
                .map(|(c, up)| if up { c.to_ascii_uppercase() } else { c })
                .collect();
            inserts.sort_by_key(|&(at, _)| std::cmp::Reverse(at));
            for (at, c) in inserts {
                chars.insert(at, c);
            }
            chars.into_iter().collect()
        })
}

/// `path` with some of its letters percent-encoded (Chromium decodes them: same file).
fn encode(path: String) -> impl Strategy<Value = String> {
    let n = path.len();
    prop::collection::vec(prop::bool::weighted(0.2), n).prop_map(move |enc| {
        path.chars()
            .zip(enc)
            .map(|(c, e)| {
                if e && c.is_ascii_alphabetic() {
                    format!("%{:02X}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect()
    })
}

/// A `file:` URL of `path`, without the outer edges.
fn file_url(path: String) -> impl Strategy<Value = String> {
    (
        scramble("file"),
        select(vec!["//", "", "//localhost", "\\\\"]),
        encode(path),
        select(vec!["", "?q=1", "#top"]),
    )
        .prop_map(|(scheme, sep, path, suffix)| format!("{scheme}:{sep}{path}{suffix}"))
}

/// Spellings of one class; `path` is the local file, `web` an http URL of a page.
pub fn spellings(class: Class, path: &str, web: &str) -> BoxedStrategy<Spelling> {
    let path = path.to_string();
    let web = web.to_string();
    let text: BoxedStrategy<String> = match class {
        Class::File => (edge(), file_url(path), edge())
            .prop_map(|(a, u, b)| format!("{a}{u}{b}"))
            .boxed(),
        Class::Filesystem => (
            edge(),
            scramble("filesystem"),
            select(vec![format!("file://{path}"), format!("{web}temporary/x")]),
            edge(),
        )
            .prop_map(|(a, s, inner, b)| format!("{a}{s}:{inner}{b}"))
            .boxed(),
        Class::ViewSource => (
            edge(),
            prop::collection::vec(
                (
                    scramble("view-source"),
                    select(vec!["", " ", "  ", "\u{1}"]),
                ),
                1..4,
            ),
            file_url(path),
            edge(),
        )
            .prop_map(|(a, layers, inner, b)| {
                let wrap: String = layers.iter().map(|(s, gap)| format!("{s}:{gap}")).collect();
                format!("{a}{wrap}{inner}{b}")
            })
            .boxed(),
        Class::Blob => (
            edge(),
            scramble("blob"),
            prop_oneof![
                file_url(path).boxed(),
                Just("null/0b1c2d3e-1111-2222-3333-444455556666".to_string()).boxed(),
            ],
            edge(),
        )
            .prop_map(|(a, s, inner, b)| format!("{a}{s}:{inner}{b}"))
            .boxed(),
        Class::PercentScheme => (
            edge(),
            select(vec![
                "%66ile:", "f%69le:", "fi%6Ce:", "fil%65:", "file%3A", "FILE%3a",
            ]),
            encode(path),
        )
            .prop_map(|(a, scheme, path)| format!("{a}{scheme}//{path}"))
            .boxed(),
        Class::NoScheme => (
            edge(),
            prop_oneof![
                Just(path.clone()),
                Just(path.trim_start_matches('/').to_string()),
                Just(format!("//localhost{path}")),
                Just(format!("\\\\localhost{}", path.replace('/', "\\"))),
                Just(format!("c:{path}")),
                Just(format!("C|{}", path.replace('/', "\\"))),
                Just("~/.ssh/id_rsa".to_string()),
            ],
            edge(),
        )
            .prop_map(|(a, p, b)| format!("{a}{p}{b}"))
            .boxed(),
        Class::Privileged => (
            edge(),
            prop::option::of(scramble("view-source")),
            select(vec![
                ("devtools", "//devtools/bundled/devtools_app.html"),
                ("chrome", "//inspect/"),
                ("chrome", "//version/"),
            ])
            .prop_flat_map(|(scheme, rest)| (scramble(scheme), Just(rest))),
            edge(),
        )
            .prop_map(|(a, view, (scheme, rest), b)| {
                let view = view.map(|v| format!("{v}:")).unwrap_or_default();
                format!("{a}{view}{scheme}:{rest}{b}")
            })
            .boxed(),
        Class::Web => {
            let rest = web
                .strip_prefix("http:")
                .expect("the web page is an http: URL")
                .to_string();
            (
                edge(),
                prop_oneof![
                    (scramble("http"), Just(rest)).prop_map(|(s, r)| format!("{s}:{r}")),
                    (prop::option::of(scramble("view-source")), Just(web.clone()))
                        .prop_map(|(v, w)| v.map(|v| format!("{v}:{w}")).unwrap_or(w)),
                    scramble("about").prop_map(|s| format!("{s}:blank")),
                    scramble("data").prop_map(|s| format!("{s}:text/html,<p>file:///etc</p>")),
                ],
                edge(),
            )
                .prop_map(|(a, u, b)| format!("{a}{u}{b}"))
                .boxed()
        }
    };
    text.prop_map(move |text| Spelling { class, text }).boxed()
}

/// Spellings of every class.
pub fn any_spelling(path: &str, web: &str) -> BoxedStrategy<Spelling> {
    let all: Vec<BoxedStrategy<Spelling>> =
        CLASSES.iter().map(|&c| spellings(c, path, web)).collect();
    proptest::strategy::Union::new(all).boxed()
}

/// `per_class` spellings of every class, the same on every run.
pub fn sample(per_class: usize, path: &str, web: &str) -> Vec<Spelling> {
    let mut runner = TestRunner::deterministic();
    let mut out = Vec::new();
    for class in CLASSES {
        let strategy = spellings(class, path, web);
        for _ in 0..per_class {
            let tree = strategy
                .new_tree(&mut runner)
                .expect("the strategies never reject");
            out.push(tree.current());
        }
    }
    out
}

/// The spellings the issue reported loading a local file on Chromium (SPEC §14), as class `File`
/// or `ViewSource`.
pub fn reported(path: &str) -> Vec<Spelling> {
    let file = |prefix: &str| Spelling {
        class: Class::File,
        text: format!("{prefix}//{path}"),
    };
    let view = |prefix: &str| Spelling {
        class: Class::ViewSource,
        text: format!("{prefix}//{path}"),
    };
    vec![
        file("\u{1}file:"),
        file("\u{1f}file:"),
        file("fi\tle:"),
        file("f\nile:"),
        file("file\r:"),
        view("view-source: file:"),
        view("view-\tsource:file:"),
        view("view-source:fi\nle:"),
    ]
}
