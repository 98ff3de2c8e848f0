//! The access rules, head by head.
use super::*;
use crate::task_id::random_hex;

fn head(headers: &[(&str, &str)]) -> Head {
    Head::for_test("POST", "/mcp", headers)
}

fn access(token: Option<&str>) -> Access {
    let addr: SocketAddr = "127.0.0.1:8737".parse().unwrap();
    Access::new(
        addr,
        &["mcp.example.com".into(), "10.0.0.5:9000".into()],
        token,
    )
}

#[test]
fn host_must_name_this_server() {
    let a = access(None);
    for ok in [
        "127.0.0.1:8737",
        "localhost:8737",
        "LOCALHOST:8737",
        "[::1]:8737",
        "mcp.example.com",
        "mcp.example.com:443",
        "10.0.0.5:9000",
    ] {
        assert_eq!(a.check(&head(&[("Host", ok)])), Ok(()), "{ok}");
    }
    for bad in [
        "evil.example.com",
        "evil.example.com:8737",
        "localhost:8738",
        "localhost",
        "127.0.0.1.evil.example:8737",
        "10.0.0.5:9001",
        "[::1]",
    ] {
        assert_eq!(
            a.check(&head(&[("Host", bad)])),
            Err(Refusal::ForeignHost),
            "{bad}"
        );
    }
    // Not a host and port at all: 400 (a proxy could read these otherwise).
    for bad in [
        "localhost:x",
        "",
        "localhost:+8737",
        "localhost:08737",
        "localhost: 8737",
        "localhost:",
        "localhost:65536",
        "[::1",
    ] {
        assert_eq!(
            a.check(&head(&[("Host", bad)])),
            Err(Refusal::BadHost),
            "{bad}"
        );
    }
    assert_eq!(a.check(&head(&[])), Err(Refusal::NoHost));
}

#[test]
fn a_specific_bound_address_is_its_own_name() {
    let a = Access::new("192.0.2.7:8737".parse().unwrap(), &[], None);
    assert_eq!(a.check(&head(&[("Host", "192.0.2.7:8737")])), Ok(()));
    let any = Access::new("0.0.0.0:8737".parse().unwrap(), &[], None);
    assert_eq!(
        any.check(&head(&[("Host", "0.0.0.0:8737")])),
        Err(Refusal::ForeignHost)
    );
}

#[test]
fn origin_when_present_must_be_this_server() {
    let a = access(None);
    let with = |o: &str| a.check(&head(&[("Host", "localhost:8737"), ("Origin", o)]));
    assert_eq!(with("http://localhost:8737"), Ok(()));
    assert_eq!(with("http://127.0.0.1:8737/"), Ok(()));
    assert_eq!(with("https://mcp.example.com"), Ok(()));
    for bad in [
        "http://evil.example.com",
        "http://localhost:8738",
        "null",
        "file://",
        "http://localhost:8737@evil.example",
        "chrome-extension://abc",
        "http://localhost",
    ] {
        assert_eq!(with(bad), Err(Refusal::ForeignOrigin), "{bad}");
    }
}

#[test]
fn a_token_is_required_on_every_request_when_set() {
    let a = access(Some("s3cret-token"));
    let with = |auth: Option<&str>| {
        let mut h = vec![("Host", "127.0.0.1:8737")];
        if let Some(v) = auth {
            h.push(("Authorization", v));
        }
        a.check(&head(&h))
    };
    assert_eq!(with(Some("Bearer s3cret-token")), Ok(()));
    assert_eq!(with(Some("bearer  s3cret-token ")), Ok(()));
    assert_eq!(with(None), Err(Refusal::Unauthorized { wrong: false }));
    assert_eq!(
        with(Some("Basic s3cret-token")),
        Err(Refusal::Unauthorized { wrong: false })
    );
    assert_eq!(
        with(Some("Bearer s3cret-tokeN")),
        Err(Refusal::Unauthorized { wrong: true })
    );
    assert_eq!(
        with(Some("Bearer s3cret-token-and-more")),
        Err(Refusal::Unauthorized { wrong: true })
    );
    // The Host rule comes first: a foreign page learns nothing about the token.
    assert_eq!(
        a.check(&head(&[("Host", "evil.example.com")])),
        Err(Refusal::ForeignHost)
    );
    assert!(!format!("{a:?}").contains("s3cret"));
    for r in [
        Refusal::Unauthorized { wrong: false },
        Refusal::Unauthorized { wrong: true },
    ] {
        assert!(!r.message().contains("s3cret"));
    }
}

#[test]
fn random_ids_are_long_and_differ() {
    let a = random_hex(16).unwrap();
    let b = random_hex(16).unwrap();
    assert_eq!(a.len(), 32);
    assert_ne!(a, b);
    assert!(token_problem("").is_some());
    assert!(token_problem("has space").is_some());
    assert!(token_problem("ok-token_1").is_none());
}

#[test]
fn the_login_token_is_read_from_the_query_percent_decoded() {
    assert_eq!(login_token("/?token=abc").as_deref(), Some(&b"abc"[..]));
    assert_eq!(
        login_token("/?x=1&token=a%2Fb#f").as_deref(),
        Some(&b"a/b"[..])
    );
    assert_eq!(login_token("/?token="), None);
    assert_eq!(login_token("/"), None);
    assert_eq!(login_token("/?token=%zz").as_deref(), Some(&b"%zz"[..]));
    assert_eq!(cookie("a=1; b=2", "b"), Some("2"));
    assert_eq!(cookie("a=1", "b"), None);
}
