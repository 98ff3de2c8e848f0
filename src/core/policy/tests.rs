//! The call rules on their own ([`super`]), and as the call path applies them to snapshots the
//! state machine published on a simulated clock (`crate::core::tests::Sim`).

use super::*;

fn r(isolate: Option<&str>, group: &str, site: Option<&str>) -> Renderer {
    Renderer {
        isolate: isolate.map(str::to_string),
        group: group.into(),
        site: site.map(str::to_string),
    }
}

#[test]
fn site_keys_are_never_finer_than_chromiums_sites() {
    // Measured on Chromium 156 (tests/it/measure_renderers.rs, d_what_a_site_is): same
    // site, one renderer for related pages.
    for (a, b) in [
        ("http://site-a.com:1", "http://sub.site-a.com:2"),
        ("http://foo.co.uk", "http://sub.foo.co.uk"),
        ("http://x.herokuapp.com", "http://sub.x.herokuapp.com"),
        ("http://a.localhost:1", "http://b.a.localhost:1"),
        ("http://a.internal", "http://b.a.internal"),
        ("http://127.0.0.1:1", "http://127.0.0.1:2"),
        ("https://site-a.com", "http://site-a.com"),
        ("http://SITE-A.com.", "http://site-a.com"),
    ] {
        assert_eq!(site_key(a), site_key(b), "{a} {b}");
        assert!(site_key(a).is_some(), "{a}");
    }
    // Measured different sites that the key tells apart too.
    for (a, b) in [
        ("http://site-a.com", "http://site-b.com"),
        ("http://a.localhost", "http://localhost"),
        ("http://a.internal", "http://c.internal"),
        ("http://127.0.0.1", "http://localhost"),
        ("http://[::1]:3", "http://127.0.0.1:3"),
    ] {
        assert_ne!(site_key(a), site_key(b), "{a} {b}");
    }
    // Measured different sites the coarse key calls one (a moment of over-blocking at
    // most, while no isolate id is known): private and multi-label public suffixes.
    assert_eq!(site_key("http://foo.co.uk"), site_key("http://bar.co.uk"));
    assert_eq!(
        site_key("http://x.herokuapp.com"),
        site_key("http://y.herokuapp.com")
    );
    for opaque in ["null", "", "://", "about:blank", "data:text/html,x"] {
        assert_eq!(site_key(opaque), None, "{opaque}");
    }
    assert_eq!(site_key("http://localhost:9").as_deref(), Some("localhost"));
}

#[test]
fn known_isolates_decide() {
    let a = r(Some("1"), "G", Some("a.com"));
    assert!(same_renderer(&a, &r(Some("1"), "H", Some("b.com"))));
    assert!(!same_renderer(&a, &r(Some("2"), "G", Some("a.com"))));
}

#[test]
fn without_an_isolate_same_group_and_site_share() {
    let a = r(Some("1"), "G", Some("a.com"));
    assert!(same_renderer(&a, &r(None, "G", Some("a.com"))));
    assert!(same_renderer(&a, &r(None, "G", None)), "unknown site");
    assert!(!same_renderer(&a, &r(None, "G", Some("b.com"))));
    assert!(!same_renderer(&a, &r(None, "H", Some("a.com"))), "noopener");
    assert!(!same_renderer(&r(None, "G", None), &r(None, "H", None)));
}
